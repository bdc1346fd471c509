// Package deploy holds no code: its tests check the deployment files
// (docker-compose.yml, Dockerfile, deploy/prometheus, deploy/grafana) and keep
// the generated parts of README.md (the configuration reference and the
// strategy table) in step with the code.
//
// Regenerate the README's generated sections after changing a Config doc
// comment or the simulator's table:
//
//	go generate ./sim/... ./deploy/...
package deploy

//go:generate go test . -run TestREADMEGenerated -update
