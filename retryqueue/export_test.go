package retryqueue

// ServiceConsumerRuns returns how many times p drained through its service
// consumer, and how many of those ended.
func ServiceConsumerRuns(p *PartnerDrainer) (runs, leaves uint64) {
	return p.svcRuns.Load(), p.svcLeaves.Load()
}
