// http-echo: the pod image of the real-cluster tests and demo. Answers every HTTP request with
// "<pod name> <client address>" on one line, so a test can tell which pod answered and whether
// the pod saw the client's own address (externalTrafficPolicy: Local). `http-echo hostname`
// prints the pod name and exits (for kubectl exec). Stdlib only, static.
package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	if len(os.Args) > 1 && os.Args[1] == "hostname" {
		fmt.Println(name)
		return
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		fmt.Fprintf(w, "%s %s\n", name, host)
	})
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		os.Exit(0)
	}()
	log.Printf("http-echo %s listening on :%s", name, port)
	log.Fatal(http.ListenAndServe(":"+port, nil))
}
