// Command lab-redis is the Redis the lab's Argo CD caches in: miniredis (the in-memory Redis Argo CD's own
// tests use, a requirement of Argo CD's go.mod), so the lab needs no Redis package. Argo CD's application
// controller and repo-server keep only caches there; losing them on a restart costs a recompute.
//
// Usage: lab-redis ADDRESS (for example 127.0.0.1:6379); runs until SIGTERM or SIGINT.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alicebob/miniredis/v2"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: lab-redis ADDRESS")
		os.Exit(2)
	}
	server := miniredis.NewMiniRedis()
	if err := server.StartAddr(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "lab-redis:", err)
		os.Exit(1)
	}
	fmt.Println("lab-redis listening on", server.Addr())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	server.Close()
}
