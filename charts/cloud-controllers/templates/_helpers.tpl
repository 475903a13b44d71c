{{/*
The four controllers, in the order objects are rendered. Each has a values block named after it in
camelCase (node-controller -> nodeController) and its RBAC in files/rbac/<name>.yaml.
*/}}
{{- define "cc.controllers" -}}
node-controller lifecycle-controller service-controller route-controller
{{- end }}

{{/* "true" with `cloud: cloudstack`, else "". */}}
{{- define "cc.cloudstack" -}}
{{- if eq (toString .Values.cloud) "cloudstack" }}true{{ end }}
{{- end }}

{{/*
What `cloud: cloudstack` cannot render: the parts only Hetzner has, asked for explicitly.
*/}}
{{- define "cc.cloudChecks" -}}
{{- if include "cc.cloudstack" . }}
{{- if .Values.routeController.enabled }}
{{- fail "routeController.enabled=true with cloud=cloudstack: CloudStack offers no routes (nor does upstream's CCM; the pod network is the CNI's). Leave routeController.enabled unset." }}
{{- end }}
{{- if .Values.simulator.enabled }}
{{- fail "simulator.enabled=true with cloud=cloudstack: the in-cluster simulator serves the Hetzner API only (cargo xtask demo --cloud cloudstack runs cloud-sim's CloudStack API outside the cluster)." }}
{{- end }}
{{- if .Values.credentials.create }}
{{- fail "credentials.create=true with cloud=cloudstack: credentials are Hetzner's. CloudStack's controllers read the Secret cloudstack.secretName (key cloudstack.key) as upstream's CCM does; create it with kubectl." }}
{{- end }}
{{- end }}
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
{{- if and (eq .component "route-controller") (include "cc.cloudstack" .root) }}
{{- /* CloudStack offers no routes (checked in cc.cloudChecks). */}}
{{- else if kindIs "invalid" $v.enabled }}
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

{{/*
The simulator's Service URL, without a path, through the variables the kubelet gives every pod of
the namespace for each of its Services (<SERVICE>_SERVICE_HOST/_PORT, the name upper-cased with - as
_) and expands in $(NAME) references of the container's variables (its makeEnvironmentVariables).
No cluster DNS is needed: on a new cluster CoreDNS only schedules once the node-controller has
initialized a node, and the node-controller needs the simulator to do that.

helm creates the Service before the Deployments. A pod whose container starts before its kubelet
has seen the Service (or with enableServiceLinks: false, which the chart never sets and renders as
true) gets the literal "$(NAME)" text: the controllers then exit with code 2 saying so, and the
kubelet's restart of the container brings the variables (the message and the exit code show in
`kubectl describe pod`, terminationMessagePolicy FallbackToLogsOnError).
*/}}
{{- define "cc.simulatorBase" -}}
{{- $var := include "cc.componentName" (dict "root" . "component" "simulator") | upper | replace "-" "_" }}
{{- printf "http://$(%s_SERVICE_HOST):$(%s_SERVICE_PORT)" $var $var }}
{{- end }}

{{/* The simulator's Service as cluster DNS names it (NOTES only: the controllers do not use it). */}}
{{- define "cc.simulatorDNS" -}}
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
Container args of a controller: the flags the chart manages, then the top-level `args` it reads,
then the block's `args` (the block wins; null drops a flag). dict "root" $ "component" name "values" block
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
{{- if include "cc.cloudstack" $root }}
{{- $_ := set $args "cloud-provider" "external-cloudstack" }}
{{- $_ := set $args "cloud-config" "/config/cloud-config" }}
{{- end }}
{{- if $v.dryRun }}
{{- $_ := set $args "dry-run" "true" }}
{{- end }}
{{- if and (eq .component "node-controller") (eq (toString $v.nodeIPOutsideCloud) "accept") }}
{{- $_ := set $args "accept-node-ip-outside-cloud" "true" }}
{{- end }}
{{- if and (eq .component "service-controller") (eq (toString $v.sourceRanges) "refuse") }}
{{- $_ := set $args "refuse-unenforced-source-ranges" "true" }}
{{- end }}
{{- if and (eq .component "service-controller") $v.certificateSecrets.enabled }}
{{- $_ := set $args "certificate-secrets" "true" }}
{{- end }}
{{- /* HCCM's top-level args (checked by cc.hccmChecks), each for the controllers that read it. */}}
{{- $given := dict }}
{{- range $flag, $value := $root.Values.args }}
{{- if has $.component (splitList " " (include "cc.flagReaders" (dict "flag" $flag))) }}
{{- $_ := set $given $flag $value }}
{{- end }}
{{- end }}
{{- range $flag, $value := $v.args }}
{{- include "cc.checkFlag" (dict "flag" $flag "where" (printf "%s.args" (include "cc.valuesKey" $.component))) }}
{{- $_ := set $given $flag $value }}
{{- end }}
{{- range $flag, $value := $given }}
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
monitoring.enabled=false), then the top-level `env` (HCCM's) it reads, then the block's `env` (null
removes; these win) and `extraEnv`.
dict "root" $ "component" name "values" block
*/}}
{{- define "cc.controllerEnv" -}}
{{- $root := .root }}
{{- $v := .values }}
{{- $h := $root.Values.hcloud }}
{{- $secret := include "cc.credentialsSecret" $root }}
{{- $env := dict }}
{{- $_ := set $env "POD_NAME" (dict "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name"))) }}
{{- if not (include "cc.cloudstack" $root) }}
{{- $token := include "cc.token" $root | fromYaml }}
{{- if $token.secret }}
{{- if $root.Values.credentials.tokenAsFile }}
{{- $_ := set $env "HCLOUD_TOKEN_FILE" (dict "value" (include "cc.tokenFile" $root)) }}
{{- else }}
{{- $_ := set $env "HCLOUD_TOKEN" (dict "valueFrom" (dict "secretKeyRef" (dict "name" $token.secret "key" $token.key))) }}
{{- end }}
{{- end }}
{{- if or (include "cc.networkForAll" $root) (eq .component "route-controller") }}
{{- $_ := set $env "HCLOUD_NETWORK" (include "cc.networkBody" $root | fromYaml) }}
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
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY" $lb.healthCheck.kubeProxy }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_SHARE_ACROSS_NAMESPACES" $lb.shareAcrossNamespaces }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_ADOPT_BY_NAME" $lb.adoptByName }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_ROBOT_TARGET_ADDRESS_FAMILY" $lb.robotTargetAddressFamily }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_TARGET_NODES_WITH_ENDPOINTS" $lb.targetNodesWithEndpoints }}
{{- $_ := set $plain "HCLOUD_LOAD_BALANCERS_ONE_PER_NETWORK_ZONE" $lb.onePerNetworkZone }}
{{- end }}
{{- range $name, $value := $plain }}
{{- if not (or (kindIs "invalid" $value) (eq (toString $value) "")) }}
{{- $_ := set $env $name (dict "value" (toString $value)) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* HCCM's top-level env (the variables this controller reads); null removes one. */}}
{{- range $name, $body := include "cc.hccmEnv" (dict "root" $root "component" .component) | fromYaml }}
{{- if kindIs "invalid" $body }}
{{- $_ := unset $env $name }}
{{- else }}
{{- $_ := set $env $name $body }}
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

{{/*
HCCM's top-level keys (hcloud-cloud-controller-manager's chart/values.yaml): defaults for every
controller. A controller's own non-null value wins. dict "root" $ "values" block
*/}}
{{- define "cc.replicas" -}}
{{- if kindIs "invalid" .values.replicas }}{{ int .root.Values.replicaCount }}{{ else }}{{ int .values.replicas }}{{ end }}
{{- end }}

{{/*
The controllers that read flag `.flag` of the top-level `args`, space-separated: the flags one
controller defines for itself go to it alone (the binaries' own flags; chart-tests holds this list to
their --help), every other flag to all four. HCCM's flags that no controller acts on (cloud-provider,
allow-untagged-cloud, webhook-secure-port, feature-gates, ...) are accepted by every binary, which
names them in one startup Warning with the reason.
*/}}
{{- define "cc.flagReaders" -}}
{{- $readers := dict
  "concurrent-node-syncs" "node-controller lifecycle-controller"
  "concurrent-node-status-updates" "node-controller"
  "node-status-update-frequency" "node-controller"
  "accept-node-ip-outside-cloud" "node-controller"
  "exclude-nodes-selector" "lifecycle-controller"
  "node-monitor-period" "lifecycle-controller"
  "provider-id-prefixes" "lifecycle-controller"
  "concurrent-service-syncs" "service-controller"
  "load-balancer-class" "service-controller"
  "load-balancer-drift-check-period" "service-controller"
  "node-sync-period" "service-controller"
  "node-sync-window" "service-controller"
  "endpoint-sync-window" "service-controller"
  "refuse-unenforced-source-ranges" "service-controller"
  "certificate-secrets" "service-controller"
  "configure-cloud-routes" "route-controller"
  "route-reconciliation-period" "route-controller"
  "route-sync-window" "route-controller"
}}
{{- index $readers .flag | default (include "cc.controllers" .) }}
{{- end }}

{{/*
The controllers that read variable `.name` of the top-level `env`, space-separated, as the chart
passes its own `hcloud.*` and `robot.*` values.
*/}}
{{- define "cc.envReaders" -}}
{{- if hasPrefix "HCLOUD_LOAD_BALANCERS_" .name }}service-controller
{{- else if hasPrefix "HCLOUD_INSTANCES_" .name }}node-controller
{{- else if eq .name "HCLOUD_NETWORK_ROUTES_ENABLED" }}route-controller
{{- else if hasPrefix "ROBOT_" .name }}node-controller lifecycle-controller service-controller
{{- else }}{{ include "cc.controllers" . }}
{{- end }}
{{- end }}

{{/* The variables of the top-level `env` the simulator replaces (ignored with simulator.enabled). */}}
{{- define "cc.simulatorVariables" -}}
HCLOUD_TOKEN HCLOUD_TOKEN_FILE HCLOUD_ENDPOINT HCLOUD_NETWORK ROBOT_USER ROBOT_USER_FILE ROBOT_PASSWORD ROBOT_PASSWORD_FILE ROBOT_ENDPOINT
{{- end }}

{{/* An entry of HCCM's env (or networking.network), its templates rendered as HCCM's chart does. */}}
{{- define "cc.hccmEnvBody" -}}
{{- $body := tpl (toYaml .body) .root | fromYaml }}
{{- if hasKey $body "value" }}{{ $_ := set $body "value" (toString $body.value) }}{{ end }}
{{- toYaml $body }}
{{- end }}

{{/*
Where the controllers' API token comes from, as YAML: `{secret: name, key: key}` (mounted as a file
with credentials.tokenAsFile, else HCLOUD_TOKEN from it); `{given: true}`: HCCM's env.HCLOUD_TOKEN is
passed as it is (a plain value, or a valueFrom that is not a Secret key); `{}`: no token from the
chart (HCCM's `env.HCLOUD_TOKEN: null`, e.g. for HCLOUD_TOKEN_FILE).
*/}}
{{- define "cc.token" -}}
{{- $c := .Values.credentials }}
{{- if include "cc.cloudstack" . }}
{}
{{- else if .Values.simulator.enabled }}
secret: {{ include "cc.credentialsSecret" . }}
key: token
{{- else if not (hasKey .Values.env "HCLOUD_TOKEN") }}
secret: {{ $c.secretName }}
key: {{ $c.tokenKey }}
{{- else if kindIs "invalid" .Values.env.HCLOUD_TOKEN }}
{}
{{- else }}
{{- $body := include "cc.hccmEnvBody" (dict "root" . "body" .Values.env.HCLOUD_TOKEN) | fromYaml }}
{{- $ref := dig "valueFrom" "secretKeyRef" dict $body }}
{{- if not $ref }}
given: true
{{- else if and (eq $ref.name $c.secretName) (eq $ref.key $c.tokenKey) }}
secret: {{ $c.secretName }}
key: {{ $c.tokenKey }}
{{- else if $c.create }}
{{- fail (printf "env.HCLOUD_TOKEN reads Secret %s key %s, but credentials.create makes the chart write the token to Secret %s key %s: the controllers would not read the Secret the chart writes. Remove env.HCLOUD_TOKEN (the chart passes the token of credentials.secretName/tokenKey), or set credentials.create=false." (toString $ref.name) (toString $ref.key) $c.secretName $c.tokenKey) }}
{{- else if or (ne $c.secretName "hcloud") (ne $c.tokenKey "token") }}
{{- fail (printf "env.HCLOUD_TOKEN reads Secret %s key %s, but credentials.secretName/tokenKey say Secret %s key %s: set the token's Secret in one place (credentials.secretName and credentials.tokenKey, or HCCM's env.HCLOUD_TOKEN)." (toString $ref.name) (toString $ref.key) $c.secretName $c.tokenKey) }}
{{- else }}
secret: {{ $ref.name | quote }}
key: {{ $ref.key | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The EnvVar body of HCLOUD_NETWORK the chart passes (networking, hcloud.network.enabled, the
route-controller): the simulator's Secret, HCCM's networking.network when it names anything else
than credentials.secretName/networkKey, or that Secret's key (optional: without it no network).
*/}}
{{- define "cc.networkBody" -}}
{{- $secret := include "cc.credentialsSecret" . }}
{{- $ours := dict "valueFrom" (dict "secretKeyRef" (dict "name" $secret "key" (include "cc.networkKey" .) "optional" true)) }}
{{- $given := .Values.networking.network }}
{{- if or .Values.simulator.enabled (kindIs "invalid" $given) }}
{{- toYaml $ours }}
{{- else }}
{{- $body := include "cc.hccmEnvBody" (dict "root" . "body" $given) | fromYaml }}
{{- $ref := dig "valueFrom" "secretKeyRef" dict $body }}
{{- if and $ref (eq (toString $ref.name) $secret) (eq (toString $ref.key) (include "cc.networkKey" .)) }}
{{- toYaml $ours }}
{{- else }}
{{- toYaml $body }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The top-level `env` (HCCM's) for controller `.component`, as YAML NAME -> EnvVar body: the
variables that controller reads, templates rendered; null entries as null (they remove what the
chart sets). The token's own entry is handled by cc.token. dict "root" $ "component" name
*/}}
{{- define "cc.hccmEnv" -}}
{{- $root := .root }}
{{- $out := dict }}
{{- $skip := list }}
{{- if $root.Values.simulator.enabled }}
{{- $skip = splitList " " (include "cc.simulatorVariables" .) }}
{{- end }}
{{- range $name, $body := $root.Values.env }}
{{- if and (not (has $name $skip)) (has $.component (splitList " " (include "cc.envReaders" (dict "name" $name)))) }}
{{- if kindIs "invalid" $body }}
{{- $_ := set $out $name nil }}
{{- else if and (eq $name "HCLOUD_TOKEN") (not (include "cc.token" $root | fromYaml).given) }}
{{- /* A Secret key: the token's source (cc.token), mounted as a file with tokenAsFile. */}}
{{- else }}
{{- $_ := set $out $name (include "cc.hccmEnvBody" (dict "root" $root "body" $body) | fromYaml) }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
Refuses HCCM keys (and values of them) that cannot mean here what they mean in HCCM's chart, each
saying why and what to use instead. Included once, by deployment.yaml.
*/}}
{{- define "cc.hccmChecks" -}}
{{- $v := .Values }}
{{- if ne $v.kind "Deployment" }}
{{- fail (printf "kind: %s: this chart runs each controller as a Deployment of its own (HCCM's kind: DaemonSet runs one pod on every matching node). For one pod per control-plane node, set replicaCount to the number of control-plane nodes and nodeSelector to node-role.kubernetes.io/control-plane: \"\"; with more than one replica the chart spreads a controller's pods over nodes (preferred anti-affinity, or affinity for a hard rule), and one of them leads." (toString $v.kind)) }}
{{- end }}
{{- $repo := toString $v.image.repository }}
{{- $tag := toString $v.image.tag }}
{{- if not (has $repo (list "" "docker.io/hetznercloud/hcloud-cloud-controller-manager" "hetznercloud/hcloud-cloud-controller-manager")) }}
{{- fail (printf "image.repository: %s: HCCM's image.repository names its one image; this chart runs one image per controller. Set nodeController.image.repository, lifecycleController.image.repository, serviceController.image.repository and routeController.image.repository (e.g. to your mirror of ghcr.io/cloud-controllers/<controller>), and remove image.repository." $repo) }}
{{- end }}
{{- if not (has $tag (list "" "v{{ $.Chart.Version }}" "{{ $.Chart.Version }}")) }}
{{- fail (printf "image.tag: %s pins HCCM's image, which this chart does not run: each controller's image tag is <controller>.image.tag (default: the chart's appVersion). Remove image.tag." $tag) }}
{{- end }}
{{- $hccmSelector := dict "app.kubernetes.io/name" "{{ include \"hcloud-cloud-controller-manager.name\" $ }}" "app.kubernetes.io/instance" "{{ $.Release.Name }}" }}
{{- if and $v.selectorLabels (ne (toYaml $v.selectorLabels) (toYaml $hccmSelector)) }}
{{- fail "selectorLabels: the chart's selector labels are fixed (app.kubernetes.io/name, app.kubernetes.io/instance and app.kubernetes.io/component, one set per controller) and a Deployment's selector cannot change after install. Remove selectorLabels; labels for the pods go in podLabels." }}
{{- end }}
{{- if not $v.simulator.enabled }}
{{- if and (hasKey $v.env "HCLOUD_TOKEN_FILE") (not (and (hasKey $v.env "HCLOUD_TOKEN") (kindIs "invalid" $v.env.HCLOUD_TOKEN))) }}
{{- fail "env.HCLOUD_TOKEN_FILE is set, but the token is still passed from a Secret (HCCM's default env.HCLOUD_TOKEN, or credentials.secretName): with both, the controllers use the variable and ignore the file, as HCCM does. Set env.HCLOUD_TOKEN: null to read the token from the file, or remove env.HCLOUD_TOKEN_FILE." }}
{{- end }}
{{- if and (hasKey $v.env "HCLOUD_NETWORK") $v.networking.enabled }}
{{- fail "env.HCLOUD_NETWORK and networking.enabled both set the network: HCCM's chart renders both, and the one of networking.network is used. Remove env.HCLOUD_NETWORK and set networking.network (default: Secret credentials.secretName, key credentials.networkKey)." }}
{{- end }}
{{- end }}
{{- range $flag, $value := $v.args }}
{{- include "cc.checkFlag" (dict "flag" $flag "where" "args") }}
{{- if or (and (kindIs "bool" $value) (not $value)) (and (or (kindIs "float64" $value) (kindIs "int64" $value) (kindIs "int" $value)) (eq (toString $value) "0")) }}
{{- fail (printf "args.%s: %v: HCCM's chart renders false and 0 as the bare flag --%s, which turns a boolean flag on. Write the value as a string to say which you mean: \"false\" (--%s=false), \"0\" (--%s=0) or \"\" (--%s)." $flag $value $flag $flag $flag $flag) }}
{{- end }}
{{- end }}
{{- end }}

{{/* Fails for a flag the chart manages. dict "flag" name "where" "args" or "<controller>.args" */}}
{{- define "cc.checkFlag" -}}
{{- if has .flag (list "admin-address" "leader-elect" "leader-elect-resource-namespace" "leader-elect-resource-name" "cluster-cidr" "kubeconfig") }}
{{- fail (printf "%s.%s: this flag is managed by the chart (admin-address: adminPort; leader-elect*: leaderElection, and the Lease name and namespace are fixed by the RBAC in files/rbac; cluster-cidr: routeController.clusterCIDR or networking.clusterCIDR; kubeconfig: the pod's ServiceAccount)" .where .flag) }}
{{- end }}
{{- end }}

{{/*
The name of a controller's Lease, as the controller derives it (controller-kit's
config/leader_election.rs): cloud-controller-manager-<controller>, with -dry-run for a shadow. The
chart refuses --leader-elect-resource-name in args, so nothing else can change it.
dict "root" $ "component" name "values" block
*/}}
{{- define "cc.leaseName" -}}
cloud-controller-manager-{{ .component }}{{ if .values.dryRun }}-dry-run{{ end }}
{{- end }}
