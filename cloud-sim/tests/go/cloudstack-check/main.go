// cloudstack-check calls the CloudStack API at $CS_API_URL with apache/cloudstack-go v2.19.0, the
// SDK of the upstream CloudStack CCM, built as that CCM builds it (NewAsyncClient, so writes wait
// for their jobs), and prints one JSON line per operation: {"op", "result": <what the SDK decoded,
// marshalled back>, "count": <the helpers' count>} or {"op", "error": <err.Error()>, "count"}.
// Operations are `name` or `name:arg,arg,...`; see the switch below.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/apache/cloudstack-go/v2/cloudstack"
)

func main() {
	cs := cloudstack.NewAsyncClient(os.Getenv("CS_API_URL"), os.Getenv("CS_API_KEY"), os.Getenv("CS_SECRET_KEY"), false)
	cs.AsyncTimeout(30)
	out := json.NewEncoder(os.Stdout)
	for _, op := range os.Args[1:] {
		name, rest, _ := strings.Cut(op, ":")
		args := strings.Split(rest, ",")
		arg := func(i int) string {
			if i < len(args) {
				return args[i]
			}
			return ""
		}
		result, count, err := run(cs, name, arg)
		line := map[string]any{"op": op, "count": count}
		if err != nil {
			line["error"] = err.Error()
		} else {
			line["result"] = result
		}
		if err := out.Encode(line); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func run(cs *cloudstack.CloudStackClient, name string, arg func(int) string) (any, int, error) {
	project := cloudstack.WithProject(arg(1))
	switch name {
	// --- what the CCM reads for nodes ---
	case "vm-by-name":
		return cs.VirtualMachine.GetVirtualMachineByName(arg(0), project)
	case "vm-by-id":
		return cs.VirtualMachine.GetVirtualMachineByID(arg(0), project)
	case "list-vms":
		p := cs.VirtualMachine.NewListVirtualMachinesParams()
		p.SetListall(true)
		p.SetDetails([]string{"min", "nics"})
		if arg(0) != "" {
			p.SetProjectid(arg(0))
		}
		r, err := cs.VirtualMachine.ListVirtualMachines(p)
		return r, count(r, err), err
	case "project-id":
		return cs.Project.GetProjectID(arg(0))
	case "zones":
		r, err := cs.Zone.ListZones(cs.Zone.NewListZonesParams())
		return r, count(r, err), err
	case "offerings":
		r, err := cs.ServiceOffering.ListServiceOfferings(cs.ServiceOffering.NewListServiceOfferingsParams())
		return r, count(r, err), err
	case "networks":
		p := cs.Network.NewListNetworksParams()
		p.SetListall(true)
		r, err := cs.Network.ListNetworks(p)
		return r, count(r, err), err
	case "projects":
		p := cs.Project.NewListProjectsParams()
		p.SetListall(true)
		r, err := cs.Project.ListProjects(p)
		return r, count(r, err), err
	case "capabilities":
		r, err := cs.Configuration.ListCapabilities(cs.Configuration.NewListCapabilitiesParams())
		return r, 0, err
	case "ms":
		r, err := cs.Management.ListManagementServersMetrics(cs.Management.NewListManagementServersMetricsParams())
		return r, count(r, err), err
	case "job":
		r, err := cs.Asyncjob.QueryAsyncJobResult(cs.Asyncjob.NewQueryAsyncJobResultParams(arg(0)))
		return r, 0, err
	// --- what the CCM reads and writes for load balancers ---
	case "network":
		return cs.Network.GetNetworkByID(arg(0), project)
	case "ip":
		return cs.Address.GetPublicIpAddressByID(arg(0))
	case "ip-by-address":
		p := cs.Address.NewListPublicIpAddressesParams()
		p.SetIpaddress(arg(0))
		p.SetAllocatedonly(false)
		p.SetListall(true)
		r, err := cs.Address.ListPublicIpAddresses(p)
		return r, count(r, err), err
	case "associate":
		p := cs.Address.NewAssociateIpAddressParams()
		p.SetNetworkid(arg(0))
		r, err := cs.Address.AssociateIpAddress(p)
		return r, 0, err
	case "disassociate":
		r, err := cs.Address.DisassociateIpAddress(cs.Address.NewDisassociateIpAddressParams(arg(0)))
		return r, 0, err
	case "create-lb":
		p := cs.LoadBalancer.NewCreateLoadBalancerRuleParams("roundrobin", arg(0), atoi(arg(5)), atoi(arg(4)))
		p.SetPublicipid(arg(1))
		p.SetNetworkid(arg(2))
		p.SetProtocol(arg(3))
		p.SetOpenfirewall(false)
		p.SetCidrlist([]string{"0.0.0.0/0"})
		r, err := cs.LoadBalancer.CreateLoadBalancerRule(p)
		return r, 0, err
	case "list-lb":
		p := cs.LoadBalancer.NewListLoadBalancerRulesParams()
		p.SetKeyword(arg(0))
		p.SetListall(true)
		r, err := cs.LoadBalancer.ListLoadBalancerRules(p)
		return r, count(r, err), err
	case "update-lb":
		p := cs.LoadBalancer.NewUpdateLoadBalancerRuleParams(arg(0))
		p.SetAlgorithm(arg(1))
		p.SetProtocol(arg(2))
		r, err := cs.LoadBalancer.UpdateLoadBalancerRule(p)
		return r, 0, err
	case "delete-lb":
		r, err := cs.LoadBalancer.DeleteLoadBalancerRule(cs.LoadBalancer.NewDeleteLoadBalancerRuleParams(arg(0)))
		return r, 0, err
	case "assign":
		p := cs.LoadBalancer.NewAssignToLoadBalancerRuleParams(arg(0))
		p.SetVirtualmachineids(strings.Split(arg(1), "+"))
		r, err := cs.LoadBalancer.AssignToLoadBalancerRule(p)
		return r, 0, err
	case "remove":
		p := cs.LoadBalancer.NewRemoveFromLoadBalancerRuleParams(arg(0))
		p.SetVirtualmachineids(strings.Split(arg(1), "+"))
		r, err := cs.LoadBalancer.RemoveFromLoadBalancerRule(p)
		return r, 0, err
	case "lb-instances":
		r, err := cs.LoadBalancer.ListLoadBalancerRuleInstances(cs.LoadBalancer.NewListLoadBalancerRuleInstancesParams(arg(0)))
		return r, count(r, err), err
	case "fw-create":
		p := cs.Firewall.NewCreateFirewallRuleParams(arg(0), arg(1))
		p.SetCidrlist([]string{"0.0.0.0/0"})
		p.SetStartport(atoi(arg(2)))
		p.SetEndport(atoi(arg(2)))
		r, err := cs.Firewall.CreateFirewallRule(p)
		return r, 0, err
	case "fw-list":
		p := cs.Firewall.NewListFirewallRulesParams()
		p.SetIpaddressid(arg(0))
		p.SetListall(true)
		r, err := cs.Firewall.ListFirewallRules(p)
		return r, count(r, err), err
	case "fw-delete":
		r, err := cs.Firewall.DeleteFirewallRule(cs.Firewall.NewDeleteFirewallRuleParams(arg(0)))
		return r, 0, err
	case "acl-list-by-id":
		return cs.NetworkACL.GetNetworkACLListByID(arg(0))
	case "acl-create":
		p := cs.NetworkACL.NewCreateNetworkACLParams(arg(2))
		p.SetAclid(arg(0))
		p.SetAction("Allow")
		p.SetCidrlist([]string{"0.0.0.0/0"})
		p.SetStartport(atoi(arg(3)))
		p.SetEndport(atoi(arg(3)))
		p.SetNetworkid(arg(1))
		p.SetTraffictype("Ingress")
		r, err := cs.NetworkACL.CreateNetworkACL(p)
		return r, 0, err
	case "acls":
		p := cs.NetworkACL.NewListNetworkACLsParams()
		p.SetListall(true)
		p.SetNetworkid(arg(0))
		r, err := cs.NetworkACL.ListNetworkACLs(p)
		return r, count(r, err), err
	case "acl-delete":
		r, err := cs.NetworkACL.DeleteNetworkACL(cs.NetworkACL.NewDeleteNetworkACLParams(arg(0)))
		return r, 0, err
	}
	fmt.Fprintf(os.Stderr, "unknown operation %q\n", name)
	os.Exit(2)
	return nil, 0, nil
}

// count reads the `Count` of any list response (0 on error).
func count(r any, err error) int {
	if err != nil {
		return 0
	}
	b, _ := json.Marshal(r)
	var c struct{ Count int }
	_ = json.Unmarshal(b, &c)
	return c.Count
}
