package middleware

// DeadReasonMetadataTooLarge is the dead-letter reason of a message whose
// own metadata is larger than [Config.MaxMetadataSize] (the cause wraps
// [ErrMetadataTooLarge] and gives the size and the limit, never a key or
// value). It is dead-lettered before admission, in either mode, on its
// partner's route.
const DeadReasonMetadataTooLarge = "metadata-too-large"

// Reasons of the per-partner mode ([Config.Partners]). Each is a constant,
// so an [Event.Reason] stays a bounded label value.
const (
	// ReasonPartnerLimit is the [Event.Reason] of a message diverted
	// because the partner registry is full ([partner.ErrPartnerLimit]):
	// the partner is new, the registry holds [partner.Config.MaxPartners]
	// and none can be evicted. The queue diverts it as not attempted
	// ([retryqueue.ReasonNotAttempted] in its metadata, with the cause in
	// its history): no attempt is counted and it comes back after the
	// not-attempted backoff. It is never dead-lettered for the cap (only,
	// like any message, once [retryqueue.Config.MaxAge] has passed).
	ReasonPartnerLimit = "partner-limit"

	// ReasonBulkhead is the [Event.Reason] of a message diverted because
	// its partner's bulkhead was full ([partner.ErrBulkheadFull]:
	// [partner.PartnerConfig.MaxInFlight] calls in flight), so a slow
	// partner does not hold every handler. It is diverted as
	// [ReasonPartnerLimit] is: not attempted, no attempt counted, the
	// breaker not asked.
	ReasonBulkhead = "bulkhead"

	// DeadReasonNoPartner is the dead-letter reason of a message without a
	// partner key and no [Config.DefaultPartner] (the cause wraps
	// [ErrNoPartner]). Such a dead letter takes the route of the empty key
	// (partner token "="); its [Event.Partner] is "".
	DeadReasonNoPartner = "no-partner"

	// DeadReasonPartnerKey is the dead-letter reason of a message whose
	// partner key is longer than [partner.Config.MaxKeyLen]
	// ([partner.ErrKeyTooLong]). The dead letter takes the key's route
	// (a hashed token, see [partner.Token]).
	DeadReasonPartnerKey = "partner-key-too-long"

	// DeadReasonPartnerConfig is the dead-letter reason of a message whose
	// partner could not be created because [partner.Config.Override] made
	// an invalid configuration (an error wrapping
	// [partner.ErrInvalidConfig], also logged). Replay it once the
	// Override is fixed.
	DeadReasonPartnerConfig = "partner-config"

	// ReasonParked is the [Event.Reason] of a message whose handler
	// returned a [deliver.ParkError] (a partner's certificate not trusted,
	// for example): the partner's breaker is forced open with the error as
	// its reason (see park.go) and the message diverted for failure
	// ([retryqueue.ReasonFailure] in its metadata, its attempt counted).
	ReasonParked = "parked"
)
