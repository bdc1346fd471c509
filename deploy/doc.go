// Package deploy holds no code: its tests check the deployment files
// (docker-compose.yml, Dockerfile, deploy/prometheus, deploy/grafana), run a
// real Prometheus server (Debian's prometheus package: skipped when missing,
// failing under CI=true) against a floodgate pipeline to evaluate every
// dashboard query, check the alerting rules and the exposition with
// promtool, and keep README.md's metrics table and generated parts (the
// configuration reference and the strategy table) in step with the code.
//
// Regenerate the README's generated sections after changing a Config doc
// comment or the simulator's table:
//
//	go generate ./sim/... ./deploy/...
package deploy

//go:generate go test . -run TestREADMEGenerated -update
