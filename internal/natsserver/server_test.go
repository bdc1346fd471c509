package natsserver_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestStartRestartShutdown(t *testing.T) {
	s, err := natsserver.Start(natsserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	url, dir := s.ClientURL(), s.StoreDir()
	if s.Port() <= 0 {
		t.Fatalf("port = %d, want > 0", s.Port())
	}

	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s", []byte("one")); err != nil {
		t.Fatal(err)
	}

	s.Stop()
	if s.Running() {
		t.Fatal("Running after Stop")
	}
	shortCtx, shortCancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := js.Publish(shortCtx, "s", []byte("lost")); err == nil {
		t.Fatal("publish to a stopped server succeeded")
	}
	shortCancel()

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.ClientURL() != url || s.StoreDir() != dir {
		t.Fatalf("after restart url/dir = %s %s, want %s %s", s.ClientURL(), s.StoreDir(), url, dir)
	}
	// The client reconnects by itself; the stream and its message survived.
	var info *jetstream.StreamInfo
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := js.Stream(ctx, "S")
		if err == nil {
			info, err = st.Info(ctx)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if info.State.Msgs < 1 {
		t.Fatalf("stream has %d messages after restart, want >= 1", info.State.Msgs)
	}
	m, err := js.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := m.GetMsg(ctx, 1)
	if err != nil || string(raw.Data) != "one" {
		t.Fatalf("message 1 after restart = %v, %v; want \"one\"", raw, err)
	}

	s.Shutdown()
	s.Shutdown() // idempotent
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("store dir %s still exists after Shutdown: %v", dir, err)
	}
}

func TestGivenStoreDirIsKept(t *testing.T) {
	dir := t.TempDir()
	s, err := natsserver.Start(natsserver.Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("given store dir removed: %v", err)
	}
}

func TestInvalidPort(t *testing.T) {
	_, err := natsserver.Start(natsserver.Options{Port: 70000})
	if !errors.Is(err, natsserver.ErrInvalidPort) {
		t.Fatalf("err = %v, want ErrInvalidPort", err)
	}
}
