package guard

import (
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of FailureOptions.
const (
	DefaultBurst      = 10
	DefaultEvery      = 6 * time.Second // with the burst: 10 a minute
	DefaultMaxClients = 4096
)

// FailureOptions configure Failures.
type FailureOptions struct {
	// Burst is how many wrong credentials a client may send in a row
	// before it is limited; Every is how often it earns one more. Defaults:
	// DefaultBurst, DefaultEvery.
	Burst int
	Every time.Duration
	// MaxClients bounds how many clients are tracked; past it, clients not
	// yet tracked share one allowance, so a flood of addresses cannot grow
	// the table. Default DefaultMaxClients.
	MaxClients int
	// Now tells the time; nil is time.Now.
	Now func() time.Time
	// Report, when set, is told of every wrong credential (for a metric
	// and the log). It must not block.
	Report func(Failure)
}

// Failure is one wrong credential, as told to FailureOptions.Report.
type Failure struct {
	// Entry is where it was presented: "api", "mcp", "console".
	Entry string
	// Client is the ClientKey it is counted against.
	Client string
	// Limited: the client had used up its allowance, and was answered 429.
	Limited bool
	// FirstLimited: the first limited failure since the client was last
	// within its allowance (log this one; the rest are counted only).
	FirstLimited bool
	// RetryAfter, when Limited, is the time until one more attempt is
	// within the client's allowance: the answer's Retry-After.
	RetryAfter time.Duration
}

// Failures counts wrong credentials per client, each client with a token
// bucket (golang.org/x/time/rate): a client that sends more than its
// allowance of wrong ones is answered 429 with the time until it may try
// again. It never refuses a right credential: callers check the credential
// first and ask Failures only about wrong ones, so whoever holds a valid
// token is always served, however many wrong ones other processes send
// from the same address. It is safe for concurrent use.
type Failures struct {
	burst      int
	every      time.Duration
	maxClients int
	now        func() time.Time
	report     func(Failure)

	mu       sync.Mutex
	clients  map[string]*bucket
	overflow *bucket
}

type bucket struct {
	lim     *rate.Limiter
	limited bool // the last failure was over the allowance
}

// NewFailures makes a failure counter.
func NewFailures(o FailureOptions) *Failures {
	f := &Failures{burst: o.Burst, every: o.Every, maxClients: o.MaxClients, now: o.Now, report: o.Report, clients: map[string]*bucket{}}
	if f.burst <= 0 {
		f.burst = DefaultBurst
	}
	if f.every <= 0 {
		f.every = DefaultEvery
	}
	if f.maxClients <= 0 {
		f.maxClients = DefaultMaxClients
	}
	if f.now == nil {
		f.now = time.Now
	}
	f.overflow = f.newBucket()
	return f
}

func (f *Failures) newBucket() *bucket {
	return &bucket{lim: rate.NewLimiter(rate.Every(f.every), f.burst)}
}

// Fail records a wrong credential presented at entry by client (a
// ClientKey). When the result is Limited, the client had used up its
// allowance: answer 429 with its RetryAfter. Otherwise answer 401 (or the
// entry's own refusal).
func (f *Failures) Fail(entry, client string) Failure {
	now := f.now()
	out := Failure{Entry: entry, Client: client}
	f.mu.Lock()
	b := f.bucketOf(client, now)
	if b.lim.AllowN(now, 1) {
		b.limited = false
	} else {
		out.Limited, out.FirstLimited = true, !b.limited
		b.limited = true
		r := b.lim.ReserveN(now, 1)
		out.RetryAfter = r.DelayFrom(now)
		r.CancelAt(now)
	}
	f.mu.Unlock()
	if f.report != nil {
		f.report(out)
	}
	return out
}

// RetryAfterSeconds is a Retry-After header value for d: whole seconds,
// at least 1.
func RetryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(int((d + time.Second - 1) / time.Second))
}

// bucketOf returns the client's bucket, making one when there is room.
// Guarded by mu.
func (f *Failures) bucketOf(client string, now time.Time) *bucket {
	if b, ok := f.clients[client]; ok {
		return b
	}
	if len(f.clients) >= f.maxClients {
		// Forget the clients whose allowance is whole again: they hold
		// nothing worth keeping.
		for k, b := range f.clients {
			if b.lim.TokensAt(now) >= float64(f.burst) {
				delete(f.clients, k)
			}
		}
		if len(f.clients) >= f.maxClients {
			return f.overflow
		}
	}
	b := f.newBucket()
	f.clients[client] = b
	return b
}
