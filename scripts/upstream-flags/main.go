// Asks the upstream cloud-controller-manager library (k8s.io/cloud-provider) for its command-line
// surface, so edge-ccm's flag table can be checked against it (src/options/upstream-flags.ts,
// written by scripts/gen-upstream-flags.sh). Two modes:
//
//	surface            the flags of NewCloudControllerManagerCommand by help section, and the
//	                   feature gates it knows, the names --tls-cipher-suites and --tls-min-version
//	                   accept, as JSON
//	configz ARGS...    the /configz body the upstream binary serves after parsing ARGS (the
//	                   component config parts only: no kubeconfig or serving is needed)
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/wait"
	featureutil "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/cloud-provider/app"
	ccmconfigv1alpha1 "k8s.io/cloud-provider/config/v1alpha1"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // as upstream's sample main: the json log format
	"k8s.io/component-base/version/verflag"
)

type flagInfo struct {
	Section    string `json:"section"`
	Name       string `json:"name"`
	Shorthand  string `json:"shorthand,omitempty"`
	Type       string `json:"type"`
	Default    string `json:"default"`
	Deprecated bool   `json:"deprecated,omitempty"`
	Hidden     bool   `json:"hidden,omitempty"`
}

type gateInfo struct {
	Name       string `json:"name"`
	Default    bool   `json:"default"`
	PreRelease string `json:"preRelease"`
	Locked     bool   `json:"locked,omitempty"`
}

// sections builds the flag sets the way NewCloudControllerManagerCommand does, keeping their names.
func sections(s *options.CloudControllerManagerOptions) cliflag.NamedFlagSets {
	fss := s.Flags(app.ControllerNames(app.DefaultInitFuncConstructors), app.ControllersDisabledByDefault.List(),
		names.CCMControllerAliases(), app.AllWebhooks, app.DisabledByDefaultWebhooks)
	global := fss.FlagSet("global")
	verflag.AddFlags(global)
	logsapi.AddFlags(logs.NewOptions(), global)
	globalflag.AddGlobalFlags(global, "cloud-controller-manager", logs.SkipLoggingConfigurationFlags())
	return fss
}

func surface() {
	s, err := options.NewCloudControllerManagerOptions()
	must(err)
	fss := sections(s)
	var flags []flagInfo
	seen := map[string]bool{}
	for _, name := range fss.Order {
		fss.FlagSets[name].VisitAll(func(f *pflag.Flag) {
			seen[f.Name] = true
			flags = append(flags, flagInfo{name, f.Name, f.Shorthand, f.Value.Type(), f.DefValue, f.Deprecated != "", f.Hidden})
		})
	}
	// The command itself must have no flag outside those sections.
	s2, err := options.NewCloudControllerManagerOptions()
	must(err)
	cmd := app.NewCloudControllerManagerCommand(s2, nil, app.DefaultInitFuncConstructors, names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !seen[f.Name] {
			must(fmt.Errorf("flag --%s of the command is in no section", f.Name))
		}
	})
	var gates []gateInfo
	for name, spec := range featureutil.DefaultMutableFeatureGate.GetAll() {
		gates = append(gates, gateInfo{string(name), spec.Default, string(spec.PreRelease), spec.LockToDefault})
	}
	sort.Slice(gates, func(i, j int) bool { return gates[i].Name < gates[j].Name })
	emit(map[string]any{"flags": flags, "featureGates": gates,
		"tlsCipherSuites": cliflag.TLSCipherPossibleValues(), "tlsVersions": cliflag.TLSPossibleVersions()})
}

// configz follows Run: the options' ApplyTo for the component config, converted to v1alpha1.
func configz(args []string) {
	s, err := options.NewCloudControllerManagerOptions()
	must(err)
	fs := pflag.NewFlagSet("ccm", pflag.ContinueOnError)
	for _, f := range sections(s).FlagSets {
		fs.AddFlagSet(f)
	}
	must(fs.Parse(args))
	c, err := options.NewDefaultComponentConfig()
	must(err)
	must(s.Generic.ApplyTo(&c.Generic, app.ControllerNames(app.DefaultInitFuncConstructors), app.ControllersDisabledByDefault.List(), names.CCMControllerAliases()))
	must(s.KubeCloudShared.ApplyTo(&c.KubeCloudShared))
	must(s.ServiceController.ApplyTo(&c.ServiceController))
	must(s.Webhook.ApplyTo(&c.Webhook))
	c.NodeStatusUpdateFrequency = s.NodeStatusUpdateFrequency
	must(s.NodeController.ApplyTo(&c.NodeController))
	external := &ccmconfigv1alpha1.CloudControllerManagerConfiguration{}
	must(ccmconfigv1alpha1.Convert_config_CloudControllerManagerConfiguration_To_v1alpha1_CloudControllerManagerConfiguration(c, external, nil))
	external.SetGroupVersionKind(ccmconfigv1alpha1.SchemeGroupVersion.WithKind("CloudControllerManagerConfiguration"))
	b, err := json.Marshal(map[string]any{app.ConfigzName: external})
	must(err)
	fmt.Println(string(b))
}

func emit(v any) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	must(enc.Encode(v))
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "surface" {
		surface()
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "configz" {
		configz(os.Args[2:])
		return
	}
	fmt.Fprintln(os.Stderr, "usage: upstream-flags surface | configz ARGS...")
	os.Exit(2)
}
