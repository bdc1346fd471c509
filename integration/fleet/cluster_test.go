package fleet

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// cluster is a 3-node NATS cluster with JetStream (file storage), on
// loopback ports chosen at start and kept across a node's restart.
type cluster struct {
	mu      sync.Mutex
	nodes   []*server.Server
	ports   []int // client ports
	cports  []int // cluster (route) ports
	dirs    []string
	name    string
	tempDir string
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func startCluster(dir string) (*cluster, error) {
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	c := &cluster{ports: ports[:3], cports: ports[3:], name: "floodgate-it", tempDir: dir, nodes: make([]*server.Server, 3)}
	for i := range 3 {
		c.dirs = append(c.dirs, filepath.Join(dir, fmt.Sprintf("n%d", i)))
	}
	for i := range 3 {
		if err := c.startNode(i); err != nil {
			c.shutdown()
			return nil, err
		}
	}
	for i := range 3 {
		if !c.nodes[i].ReadyForConnections(20 * time.Second) {
			c.shutdown()
			return nil, fmt.Errorf("node %d not ready", i)
		}
	}
	return c, nil
}

func (c *cluster) startNode(i int) error {
	var routes []*url.URL
	for j, p := range c.cports {
		if j != i {
			routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
		}
	}
	o := &server.Options{
		ServerName: fmt.Sprintf("n%d", i),
		Host:       "127.0.0.1",
		Port:       c.ports[i],
		JetStream:  true,
		StoreDir:   c.dirs[i],
		Cluster:    server.ClusterOpts{Name: c.name, Host: "127.0.0.1", Port: c.cports[i]},
		Routes:     routes,
		NoLog:      os.Getenv("FLOODGATE_FLEET_NATSLOG") == "",
		NoSigs:     true,
	}
	s, err := server.NewServer(o)
	if err != nil {
		return err
	}
	if !o.NoLog {
		s.ConfigureLogger()
	}
	s.Start()
	c.mu.Lock()
	c.nodes[i] = s
	c.mu.Unlock()
	return nil
}

// kill stops node i at once (its clients see the connection drop).
func (c *cluster) kill(i int) {
	c.mu.Lock()
	s := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// restart starts node i again on its ports with its store.
func (c *cluster) restart(i int) error {
	if err := c.startNode(i); err != nil {
		return err
	}
	if !c.nodes[i].ReadyForConnections(20 * time.Second) {
		return fmt.Errorf("node %d not ready after restart", i)
	}
	return nil
}

// urls returns the client URLs, comma-separated (a nats.go server list).
func (c *cluster) urls() string {
	var us []string
	for _, p := range c.ports {
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return strings.Join(us, ",")
}

func (c *cluster) url(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", c.ports[i]) }

func (c *cluster) shutdown() {
	for i := range c.nodes {
		c.kill(i)
	}
}

var _ = testing.Short
