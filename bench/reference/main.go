// The reference for scripts/bench: the upstream cloud-controller-manager framework
// (k8s.io/cloud-provider) with its own test-double provider, k8s.io/cloud-provider/fake,
// registered as "fake". Only this wrapper lives in the repo; the framework comes from the Go
// module proxy at the version in go.mod.
//
// The fake needs a few settings to behave like a real provider under load (see issue 7):
// InstancesV2 on (else the 3-4 call v1 path), ExistsByProviderID (else the lifecycle controller
// deletes every NotReady node), an ExternalIP (else ingress "<nil>" is rejected), a non-nil
// RouteMap, and a provider ID per node. Its maps and call logs have no lock and grow without
// bound, so every call goes through one mutex here and the logs are cut back after each call.
// Node metadata matches edge-ccm's bench fake (test/fakes/fake-ccm-main.ts autoMetadata):
// providerID fake://NAME, the node's InternalIP, one ExternalIP, its Hostname.
package main

import (
	"context"
	"io"
	"net"
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/fake"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/klog/v2"
)

const (
	instanceType = "bench.small"
	zone         = "zone-a"
	region       = "region-a"
	externalIP   = "192.0.2.10"
	// The fake's call logs are for tests; past this many entries they are dropped.
	maxCallLog = 1000
)

// lockedFake serialises every call into the fake (its balancer map is unguarded) and keeps its
// call logs bounded. The fake's calls are trivial, so the lock costs nothing measurable.
type lockedFake struct {
	*fake.Cloud
	mu sync.Mutex
}

func (l *lockedFake) enter() func() {
	l.mu.Lock()
	return func() {
		if len(l.Calls) > maxCallLog {
			l.Calls = nil
		}
		if len(l.EnsureCalls) > maxCallLog {
			l.EnsureCalls = nil
		}
		if len(l.UpdateCalls) > maxCallLog {
			l.UpdateCalls = nil
		}
		l.mu.Unlock()
	}
}

func (l *lockedFake) InstancesV2() (cloudprovider.InstancesV2, bool)   { return l, true }
func (l *lockedFake) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return l, true }
func (l *lockedFake) Routes() (cloudprovider.Routes, bool)             { return l, true }

func (l *lockedFake) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	defer l.enter()()
	return l.Cloud.InstanceExists(ctx, node)
}

func (l *lockedFake) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	defer l.enter()()
	return l.Cloud.InstanceShutdown(ctx, node)
}

func (l *lockedFake) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	defer l.enter()()
	l.ProviderID[types.NodeName(node.Name)] = "fake://" + node.Name
	md, err := l.Cloud.InstanceMetadata(ctx, node)
	delete(l.ProviderID, types.NodeName(node.Name)) // a map of every node would be memory the real provider does not hold
	if md == nil {
		return md, err
	}
	addresses := []v1.NodeAddress{}
	for _, a := range node.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			addresses = append(addresses, a)
			break
		}
	}
	addresses = append(addresses, v1.NodeAddress{Type: v1.NodeExternalIP, Address: externalIP}, v1.NodeAddress{Type: v1.NodeHostName, Address: node.Name})
	md.NodeAddresses = addresses
	md.InstanceType = instanceType
	return md, err
}

func (l *lockedFake) GetLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	defer l.enter()()
	return l.Cloud.GetLoadBalancer(ctx, clusterName, svc)
}

func (l *lockedFake) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	defer l.enter()()
	status, err := l.Cloud.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
	// The fake keeps the node list per balancer; a real provider keeps names, not node objects.
	name := l.Cloud.GetLoadBalancerName(ctx, clusterName, svc)
	if b, ok := l.Balancers[name]; ok {
		b.Hosts = nil
		l.Balancers[name] = b
	}
	return status, err
}

func (l *lockedFake) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	defer l.enter()()
	return l.Cloud.UpdateLoadBalancer(ctx, clusterName, svc, nodes)
}

func (l *lockedFake) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	defer l.enter()()
	return l.Cloud.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
}

func (l *lockedFake) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	defer l.enter()()
	return l.Cloud.ListRoutes(ctx, clusterName)
}

func (l *lockedFake) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloudprovider.Route) error {
	defer l.enter()()
	return l.Cloud.CreateRoute(ctx, clusterName, nameHint, route)
}

func (l *lockedFake) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	defer l.enter()()
	return l.Cloud.DeleteRoute(ctx, clusterName, route)
}

func newFake() *lockedFake {
	return &lockedFake{Cloud: &fake.Cloud{
		Provider:           "fake",
		EnableInstancesV2:  true,
		Exists:             true,
		ExistsByProviderID: true,
		ExternalIP:         net.ParseIP(externalIP),
		RouteMap:           map[string]*fake.Route{},
		Balancers:          map[string]fake.Balancer{},
		ProviderID:         map[types.NodeName]string{},
		Zone:               cloudprovider.Zone{FailureDomain: zone, Region: region},
	}}
}

func main() {
	cloudprovider.RegisterCloudProvider("fake", func(io.Reader) (cloudprovider.Interface, error) { return newFake(), nil })
	ccmOptions, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	command := app.NewCloudControllerManagerCommand(ccmOptions, cloudInitializer, app.DefaultInitFuncConstructors, names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	os.Exit(cli.Run(command))
}

func cloudInitializer(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	cloud, err := cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	if err != nil || cloud == nil {
		klog.Fatalf("cloud provider %q could not be initialized: %v", shared.Name, err)
	}
	return cloud
}
