package inbox

import (
	"fmt"
	"math"
	"math/rand"
	"sync"
	"time"
)

// FailureAction is what a RetryPolicy decides for a failed delivery: retry after a delay, or
// dead-letter (PULL-62).
type FailureAction struct {
	dead  bool
	delay time.Duration
}

// RetryAfter retries the message after d. A negative d becomes 0; the delay is clamped to
// [0, 2147483647] ms and cut to whole milliseconds when bound (PULL-15).
func RetryAfter(d time.Duration) FailureAction {
	if d < 0 {
		d = 0
	}
	return FailureAction{delay: d}
}

// DeadLetter moves the message to the dead letter.
func DeadLetter() FailureAction { return FailureAction{dead: true} }

// IsDeadLetter reports whether the action dead-letters.
func (a FailureAction) IsDeadLetter() bool { return a.dead }

// Delay is the retry delay (0 for a dead letter).
func (a FailureAction) Delay() time.Duration { return a.delay }

// delayMs is the delay in whole milliseconds, clamped to [0, 2147483647].
func (a FailureAction) delayMs() int64 { return clampMs(a.delay) }

func clampMs(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if ms < 0 {
		return 0
	}
	if ms > maxLeaseMs {
		return maxLeaseMs
	}
	return ms
}

// RetryPolicy maps a failed delivery (the message, with its Attempt, and the handler's error)
// to a FailureAction (PULL-60).
type RetryPolicy interface {
	Decide(msg Message, err error) FailureAction
}

// RetryPolicyFunc adapts a function to RetryPolicy.
type RetryPolicyFunc func(msg Message, err error) FailureAction

// Decide calls f.
func (f RetryPolicyFunc) Decide(msg Message, err error) FailureAction { return f(msg, err) }

// ExponentialPolicy is the default retry policy of PULL-61.
type ExponentialPolicy struct {
	maxAttempts int
	baseDelay   time.Duration
	maxDelay    time.Duration
	jitter      float64
	mu          sync.Mutex
	rng         *rand.Rand
}

// DefaultRetryPolicy is the default policy: 5 attempts, 1 s base delay, 300 s cap, jitter 0.25.
func DefaultRetryPolicy() *ExponentialPolicy {
	p, _ := NewExponentialPolicy(5, time.Second, 300*time.Second, 0.25)
	return p
}

// NewExponentialPolicy builds the policy of PULL-61 with its parameters validated (PULL-60); an
// invalid parameter gives an error wrapping ErrInvalidRetryPolicy.
func NewExponentialPolicy(maxAttempts int, baseDelay, maxDelay time.Duration, jitter float64) (*ExponentialPolicy, error) {
	switch {
	case maxAttempts < 1:
		return nil, fmt.Errorf("%w: the maximum attempts must be at least 1", ErrInvalidRetryPolicy)
	case baseDelay < 0:
		return nil, fmt.Errorf("%w: the base delay must not be negative", ErrInvalidRetryPolicy)
	case maxDelay < baseDelay:
		return nil, fmt.Errorf("%w: the maximum delay must be at least the base delay", ErrInvalidRetryPolicy)
	case math.IsNaN(jitter) || jitter < 0 || jitter > 1:
		return nil, fmt.Errorf("%w: the jitter must be between 0 and 1", ErrInvalidRetryPolicy)
	}
	return &ExponentialPolicy{
		maxAttempts: maxAttempts, baseDelay: baseDelay, maxDelay: maxDelay, jitter: jitter,
		rng: rand.New(rand.NewSource(time.Now().UnixNano())),
	}, nil
}

// Decide applies PULL-61 to a message whose attempt is msg.Attempt.
func (p *ExponentialPolicy) Decide(msg Message, _ error) FailureAction {
	n := int64(msg.Attempt) + 1
	if n >= int64(p.maxAttempts) {
		return DeadLetter()
	}
	exp := n - 1
	if exp > 30 {
		exp = 30
	}
	if exp < 0 {
		exp = 0
	}
	// Work in float milliseconds: base (<= 2^63 ns) times 2^30 cannot overflow a float64.
	d := float64(p.baseDelay) * math.Pow(2, float64(exp))
	if d > float64(p.maxDelay) {
		d = float64(p.maxDelay)
	}
	if p.jitter > 0 {
		p.mu.Lock()
		u := p.rng.Float64() * p.jitter
		p.mu.Unlock()
		d = d * (1 + u)
	}
	ms := math.Floor(d / float64(time.Millisecond))
	if ms > maxLeaseMs {
		ms = maxLeaseMs
	}
	return RetryAfter(time.Duration(ms) * time.Millisecond)
}
