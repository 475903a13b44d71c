{{/*
The four controllers, in the order objects are rendered. Each has a values block named after it in
camelCase (node-controller -> nodeController) and its RBAC in files/rbac/<name>.yaml.
*/}}
{{- define "cc.controllers" -}}
node-controller lifecycle-controller service-controller route-controller
{{- end }}

{{/* The values block of controller `.name`: dict "root" $ "name" "node-controller". */}}
{{- define "cc.valuesKey" -}}
{{- . | camelcase | untitle -}}
{{- end }}

{{/*
Whether controller `.component` is deployed: "true" or "". Its block's `enabled`; null (the
route-controller's default) follows networking.enabled, HCCM's switch. dict "root" $ "component" name
*/}}
{{- define "cc.enabled" -}}
{{- $v := index .root.Values (include "cc.valuesKey" .component) }}
{{- if kindIs "invalid" $v.enabled }}
{{- if .root.Values.networking.enabled }}true{{ end }}
{{- else if $v.enabled }}true{{ end }}
{{- end }}

{{/*
Whether controller `.component` runs with hostNetwork: "true" or "false". Its block's `hostNetwork`;
null (the default) follows networking.enabled. dict "root" $ "component" name
*/}}
{{- define "cc.hostNetwork" -}}
{{- $v := index .root.Values (include "cc.valuesKey" .component) }}
{{- if kindIs "invalid" $v.hostNetwork }}
{{- ternary "true" "false" (eq (toString .root.Values.networking.enabled) "true") }}
{{- else }}
{{- ternary "true" "false" (eq (toString $v.hostNetwork) "true") }}
{{- end }}
{{- end }}

{{/*
The route-controller's --cluster-cidr: routeController.clusterCIDR, else networking.clusterCIDR when
networking.enabled, else "".
*/}}
{{- define "cc.clusterCIDR" -}}
{{- if .Values.routeController.clusterCIDR }}
{{- .Values.routeController.clusterCIDR }}
{{- else if .Values.networking.enabled }}
{{- .Values.networking.clusterCIDR }}
{{- end }}
{{- end }}

{{/*
Whether every controller gets HCLOUD_NETWORK ("true" or ""): hcloud.network.enabled; null (the
default) follows networking.enabled. The route-controller always gets it.
*/}}
{{- define "cc.networkForAll" -}}
{{- $n := .Values.hcloud.network.enabled }}
{{- if kindIs "invalid" $n }}
{{- if .Values.networking.enabled }}true{{ end }}
{{- else if $n }}true{{ end }}
{{- end }}

{{/*
Whether PodMonitors are wanted ("true" or ""): metrics.podMonitor.enabled or HCCM's
monitoring.podMonitor.enabled, and monitoring.enabled (HCCM's: no metrics, nothing to scrape).
*/}}
{{- define "cc.podMonitorWanted" -}}
{{- if and .Values.monitoring.enabled (or .Values.metrics.podMonitor.enabled .Values.monitoring.podMonitor.enabled) }}true{{ end }}
{{- end }}

{{- define "cc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "cc.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of a component's objects: <fullname>-<component>. */}}
{{- define "cc.componentName" -}}
{{- printf "%s-%s" (include "cc.fullname" .root) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "cc.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels (immutable: never add version-like labels here). dict "root" $ "component" name */}}
{{- define "cc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cc.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Labels of every object. dict "root" $ "component" name */}}
{{- define "cc.labels" -}}
helm.sh/chart: {{ include "cc.chart" .root }}
{{ include "cc.selectorLabels" . }}
app.kubernetes.io/part-of: cloud-controllers
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* repository[:tag][@digest]; the tag defaults to the chart's appVersion. dict "root" $ "image" .image */}}
{{- define "cc.image" -}}
{{- $tag := .image.tag | default .root.Chart.AppVersion | toString -}}
{{- .image.repository }}{{ if $tag }}:{{ $tag }}{{ end }}{{ with .image.digest }}@{{ . }}{{ end }}
{{- end }}

{{/* ServiceAccount of a controller. dict "root" $ "component" name "values" block */}}
{{- define "cc.serviceAccountName" -}}
{{- .values.serviceAccount.name | default (include "cc.componentName" .) }}
{{- end }}

{{/* Where credentials.tokenAsFile mounts the token (volume "cloud-credentials"). */}}
{{- define "cc.tokenDir" -}}
/etc/cloud-controllers/credentials
{{- end }}
{{- define "cc.tokenFile" -}}
{{ include "cc.tokenDir" . }}/token
{{- end }}

{{/* The Secret the controllers read HCLOUD_TOKEN (and HCLOUD_NETWORK) from. */}}
{{- define "cc.credentialsSecret" -}}
{{- if .Values.simulator.enabled }}
{{- include "cc.componentName" (dict "root" . "component" "simulator") }}
{{- else }}
{{- .Values.credentials.secretName }}
{{- end }}
{{- end }}

{{- define "cc.tokenKey" -}}
{{- if .Values.simulator.enabled }}token{{ else }}{{ .Values.credentials.tokenKey }}{{ end }}
{{- end }}

{{- define "cc.networkKey" -}}
{{- if .Values.simulator.enabled }}network{{ else }}{{ .Values.credentials.networkKey }}{{ end }}
{{- end }}

{{/* The Secret keys of ROBOT_USER and ROBOT_PASSWORD: the simulator's Secret has fixed keys. */}}
{{- define "cc.robotUserKey" -}}
{{- if .Values.simulator.enabled }}robot-user{{ else }}{{ .Values.credentials.robotUserKey }}{{ end }}
{{- end }}

{{- define "cc.robotPasswordKey" -}}
{{- if .Values.simulator.enabled }}robot-password{{ else }}{{ .Values.credentials.robotPasswordKey }}{{ end }}
{{- end }}

{{/* The simulator's token: the value, or 64 hex characters derived from the release. */}}
{{- define "cc.simulatorToken" -}}
{{- .Values.simulator.token | default (printf "cloud-sim/%s/%s" .Release.Namespace .Release.Name | sha256sum) }}
{{- end }}

{{/*
The simulator's Robot webservice credentials (robot.enabled only): a fixed user and a password
derived from the release like the token, so both stay the same across upgrades. cloud-sim and the
controllers read them from the same Secret.
*/}}
{{- define "cc.simulatorRobotUser" -}}
cloudsim-robot
{{- end }}

{{- define "cc.simulatorRobotPassword" -}}
{{- printf "cloud-sim-robot/%s/%s" .Release.Namespace .Release.Name | sha256sum }}
{{- end }}

{{/* The simulator's Service URL, without a path. */}}
{{- define "cc.simulatorBase" -}}
{{- printf "http://%s.%s.svc:%d" (include "cc.componentName" (dict "root" . "component" "simulator")) .Release.Namespace (int .Values.simulator.port) }}
{{- end }}

{{/* HCLOUD_ENDPOINT with the simulator. */}}
{{- define "cc.simulatorEndpoint" -}}
{{- include "cc.simulatorBase" . }}/v1
{{- end }}

{{/* ROBOT_ENDPOINT with the simulator: cloud-sim serves the Robot webservice at /robot. */}}
{{- define "cc.simulatorRobotEndpoint" -}}
{{- include "cc.simulatorBase" . }}/robot
{{- end }}

{{/* Whether controller `.component` gets the ROBOT_* variables ("true" or ""): robot.enabled, and
not the route-controller (it leaves Robot Nodes alone). dict "root" $ "component" name */}}
{{- define "cc.robotFor" -}}
{{- if and .root.Values.robot.enabled (ne .component "route-controller") }}true{{ end }}
{{- end }}

{{/*
Renders a flag map as container args, sorted by flag: `--flag=value`, or `--flag` for "".
*/}}
{{- define "cc.renderArgs" -}}
{{- range $flag, $value := . }}
{{- if eq (toString $value) "" }}
- {{ printf "--%s" $flag | quote }}
{{- else }}
- {{ printf "--%s=%s" $flag (toString $value) | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Container args of a controller: the flags the chart manages, then the block's `args` (null drops a
flag). dict "root" $ "component" name "values" block
*/}}
{{- define "cc.controllerArgs" -}}
{{- $root := .root }}
{{- $v := .values }}
{{- $args := dict }}
{{- $_ := set $args "admin-address" (printf "0.0.0.0:%d" (int $v.adminPort)) }}
{{- $_ := set $args "log-format" $root.Values.logFormat }}
{{- $le := $root.Values.leaderElection }}
{{- $_ := set $args "leader-elect" (ternary "true" "false" $le.enabled) }}
{{- /* The Role of the Lease lives in the release namespace, so the Lease must too. */}}
{{- $_ := set $args "leader-elect-resource-namespace" $root.Release.Namespace }}
{{- with $le.leaseDuration }}{{ $_ := set $args "leader-elect-lease-duration" . }}{{ end }}
{{- with $le.renewDeadline }}{{ $_ := set $args "leader-elect-renew-deadline" . }}{{ end }}
{{- with $le.retryPeriod }}{{ $_ := set $args "leader-elect-retry-period" . }}{{ end }}
{{- if eq .component "route-controller" }}
{{- $_ := set $args "cluster-cidr" (include "cc.clusterCIDR" $root) }}
{{- end }}
{{- if $v.dryRun }}
{{- $_ := set $args "dry-run" "true" }}
{{- end }}
{{- range $flag, $value := $v.args }}
{{- if has $flag (list "admin-address" "leader-elect" "leader-elect-resource-namespace" "leader-elect-resource-name" "cluster-cidr" "kubeconfig") }}
{{- fail (printf "%s.args.%s: this flag is managed by the chart (admin-address: adminPort; leader-elect*: leaderElection, and the Lease name and namespace are fixed by the RBAC in files/rbac; cluster-cidr: routeController.clusterCIDR or networking.clusterCIDR)" (include "cc.valuesKey" $.component) $flag) }}
{{- end }}
{{- if kindIs "invalid" $value }}
{{- $_ := unset $args $flag }}
{{- else }}
{{- $_ := set $args $flag $value }}
{{- end }}
{{- end }}
{{- include "cc.renderArgs" $args }}
{{- end }}

{{/*
Environment of a controller: POD_NAME (Lease identity), the credentials, HCLOUD_* (and with
robot.enabled ROBOT_*) settings that controller reads (HCLOUD_METRICS_ENABLED=false with
monitoring.enabled=false), then the block's `env` (null removes) and `extraEnv`.
dict "root" $ "component" name "values" block
*/}}
{{- define "cc.controllerEnv" -}}
{{- $root := .root }}
{{- $v := .values }}
{{- $h := $root.Values.hcloud }}
{{- $secret := include "cc.credentialsSecret" $root }}
{{- $env := dict }}
{{- $_ := set $env "POD_NAME" (dict "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name"))) }}
{{- if $root.Values.credentials.tokenAsFile }}
{{- $_ := set $env "HCLOUD_TOKEN_FILE" (dict "value" (include "cc.tokenFile" $root)) }}
{{- else }}
{{- $_ := set $env "HCLOUD_TOKEN" (dict "valueFrom" (dict "secretKeyRef" (dict "name" $secret "key" (include "cc.tokenKey" $root)))) }}
{{- end }}
{{- if or (include "cc.networkForAll" $root) (eq .component "route-controller") }}
{{- $_ := set $env "HCLOUD_NETWORK" (dict "valueFrom" (dict "secretKeyRef" (dict "name" $secret "key" (include "cc.networkKey" $root) "optional" true))) }}
{{- end }}
{{- $robot := include "cc.robotFor" . }}
{{- if $robot }}
{{- /* HCCM's chart: both keys optional (without them no Robot API calls). */}}
{{- $_ := set $env "ROBOT_USER" (dict "valueFrom" (dict "secretKeyRef" (dict "name" $secret "key" (include "cc.robotUserKey" $root) "optional" true))) }}
{{- $_ := set $env "ROBOT_PASSWORD" (dict "valueFrom" (dict "secretKeyRef" (dict "name" $secret "key" (include "cc.robotPasswordKey" $root) "optional" true))) }}
{{- end }}
{{- $plain := dict }}
{{- if $root.Values.simulator.enabled }}
{{- $_ := set $plain "HCLOUD_ENDPOINT" (include "cc.simulatorEndpoint" $root) }}
{{- else }}
{{- $_ := set $plain "HCLOUD_ENDPOINT" $h.endpoint }}
{{- end }}
{{- $_ := set $plain "HCLOUD_SERVER_CACHE_MAX_AGE" $h.serverCacheMaxAge }}
{{- $_ := set $plain "HCLOUD_REQUEST_TIMEOUT" $h.requestTimeout }}
{{- $_ := set $plain "HCLOUD_DEBUG" $h.debug }}
{{- /* HCCM's monitoring.enabled=false: the binaries turn /metrics off. */}}
{{- if not $root.Values.monitoring.enabled }}
{{- $_ := set $plain "HCLOUD_METRICS_ENABLED" "false" }}
{{- end }}
{{- if $robot }}
{{- $r := $root.Values.robot }}
{{- $_ := set $plain "ROBOT_ENABLED" "true" }}
{{- $_ := set $plain "ROBOT_CACHE_TIMEOUT" $r.cacheTimeout }}
{{- $_ := set $plain "ROBOT_RATE_LIMIT_WAIT_TIME" $r.rateLimitWaitTime }}
{{- $_ := set $plain "ROBOT_FORWARD_INTERNAL_IPS" $r.forwardInternalIPs }}
{{- if $root.Values.simulator.enabled }}
{{- $_ := set $plain "ROBOT_ENDPOINT" (include "cc.simulatorRobotEndpoint" $root) }}
{{- else }}
{{- $_ := set $plain "ROBOT_ENDPOINT" $r.endpoint }}
{{- end }}
{{- end }}
{{- if eq .component "node-controller" }}
{{- $_ := set $plain "HCLOUD_INSTANCES_ADDRESS_FAMILY" $h.instances.addressFamily }}
{{- $_ := set $plain "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED" $h.instances.zoneLabelEnabled }}
{{- end }}
{{- if eq .component "route-controller" }}
{{- $_ := set $plain "HCLOUD_NETWORK_ROUTES_ENABLED" $h.networkRoutesEnabled }}
{{- end }}
{{- if eq .component "service-controller" }}
{{- $lb := $h.loadBalancers }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_ENABLED" $lb.enabled }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_LOCATION" $lb.location }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE" $lb.networkZone }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_TYPE" $lb.type }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE" $lb.algorithmType }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP" $lb.usePrivateIP }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS" $lb.disablePrivateIngress }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK" $lb.disablePublicNetwork }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_DISABLE_IPV6" $lb.disableIPv6 }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL" $lb.usesProxyProtocol }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE" $lb.privateSubnetIPRange }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL" $lb.healthCheck.interval }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT" $lb.healthCheck.timeout }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES" $lb.healthCheck.retries }}
{{- end }}
{{- range $name, $value := $plain }}
{{- if not (or (kindIs "invalid" $value) (eq (toString $value) "")) }}
{{- $_ := set $env $name (dict "value" (toString $value)) }}
{{- end }}
{{- end }}
{{- range $name, $value := $v.env }}
{{- if kindIs "invalid" $value }}
{{- $_ := unset $env $name }}
{{- else }}
{{- $_ := set $env $name (dict "value" (toString $value)) }}
{{- end }}
{{- end }}
{{- range $name, $body := $env }}
- {{ merge (dict "name" $name) $body | toYaml | nindent 2 | trim }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
