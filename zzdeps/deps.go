package deps
import (
 _ "github.com/ThreeDotsLabs/watermill"
 _ "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
 _ "github.com/nats-io/nats.go/jetstream"
 _ "github.com/nats-io/nats-server/v2/server"
 _ "github.com/google/uuid"
 _ "golang.org/x/time/rate"
 _ "pgregory.net/rapid"
)
