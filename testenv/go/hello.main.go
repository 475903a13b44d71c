// A test workload for `cargo xtask cluster`: serves "hello from <hostname> (<addresses>)" over HTTP
// on $LISTEN (default :8080) and logs a line every 10 s, so reachability, `kubectl logs` and
// `kubectl exec <pod> -- /hello -once` can be shown. `/hello -get URL` prints the status and body
// of a GET (TLS unverified), to show what a pod reaches (the `kubernetes` Service, say).
package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func greeting() string {
	host, _ := os.Hostname()
	var addrs []string
	if list, err := net.InterfaceAddrs(); err == nil {
		for _, a := range list {
			if ipnet, ok := a.(*net.IPNet); ok && !ipnet.IP.IsLoopback() {
				addrs = append(addrs, ipnet.IP.String())
			}
		}
	}
	return fmt.Sprintf("hello from %s (%s)", host, strings.Join(addrs, ", "))
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-once" {
		fmt.Println(greeting())
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "-get" {
		client := &http.Client{
			Timeout:   10 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
		}
		resp, err := client.Get(os.Args[2])
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%s\n%s\n", resp.Status, body)
		return
	}
	listen := os.Getenv("LISTEN")
	if listen == "" {
		listen = ":8080"
	}
	go func() {
		for {
			log.Print(greeting())
			time.Sleep(10 * time.Second)
		}
	}()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, greeting())
	})
	log.Printf("listening on %s", listen)
	log.Fatal(http.ListenAndServe(listen, nil))
}
