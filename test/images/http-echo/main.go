// http-echo: the pod image of the real-cluster tests and demo. Answers every HTTP request with
// "<pod name> <client address>" on one line, so a test can tell which pod answered and whether
// the pod saw the client's own address (externalTrafficPolicy: Local). `http-echo hostname`
// prints the pod name and exits (for kubectl exec); `http-echo get URL` prints URL's answer (a pod
// asking another by kubectl exec: the image has no curl), exit code 1 on failure. Stdlib only, static.
package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
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
	if len(os.Args) > 2 && os.Args[1] == "get" {
		os.Exit(get(os.Args[2]))
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

// get prints the body of url's answer; 0 on a 200, 1 otherwise (the error on stderr).
func get(url string) int {
	client := http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintf(os.Stderr, "GET %s: %s %v\n", url, resp.Status, err)
		return 1
	}
	fmt.Print(string(body))
	return 0
}
