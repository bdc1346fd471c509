package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"testing"
)

// envConsumer makes the test binary run as a consumer process: its value
// is the JSON consumerConfig. The process runs until its standard input
// closes (the test ended) or it is killed.
const envConsumer = "FLOODGATE_IT_CONSUMER"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(envConsumer); cfg != "" {
		os.Exit(runConsumerProcess(cfg))
	}
	if cfg := os.Getenv(envService); cfg != "" {
		os.Exit(runServiceProcess(cfg))
	}
	os.Exit(m.Run())
}

func runConsumerProcess(raw string) int {
	var cfg consumerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := startConsumer(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	c.stop()
	return 0
}
