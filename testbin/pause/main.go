// pause holds a pod sandbox's namespaces, as Kubernetes' own pause container
// (build/pause/linux/pause.c) does: it waits for SIGINT or SIGTERM and exits
// 0, and reaps the zombies it inherits as PID 1 (os/signal delivers SIGCHLD).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
