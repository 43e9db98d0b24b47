// pause: the sandbox image of the real-cluster tests (containerd's sandbox_image). Holds the pod's
// namespaces by doing nothing until SIGTERM or SIGINT, as registry.k8s.io/pause does. Static.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
