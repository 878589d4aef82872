package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator/internal/failure"
)

// Defaults of Options.
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultRestartDelay = time.Second
	// stderrKept bounds the program's standard error kept for a message.
	stderrKept = 4 << 10
	// maxLine bounds one line of the program's output: an answer is a
	// model's short verdict, and a program (or the API behind it) that
	// writes more is ended rather than held in the gateway's memory.
	maxLine = 1 << 20
)

// Options configure a Model.
type Options struct {
	// Program is the provider program's path. Required.
	Program string
	// Config is what the program builds. Provider and Model are required.
	Config Config
	// APIKey goes to the program on its standard input, with the Config; "" when the
	// provider needs none.
	APIKey string
	// Env is the program's environment besides the key; nil means this
	// process's.
	Env []string
	// StartTimeout bounds a start, up to the program's hello, on top of
	// the asking caller's context. Default DefaultStartTimeout.
	StartTimeout time.Duration
	// RestartDelay is the least time between two starts: a program that
	// fails at once is not started for every question. Until it has
	// passed, questions fail with the last start's error. Default
	// DefaultRestartDelay.
	RestartDelay time.Duration
}

// Model asks the provider through the program, which it starts when first
// asked and again when it has exited. It is safe for concurrent use.
type Model struct {
	opts Options
	name string
	ids  atomic.Uint64

	mu       sync.Mutex
	proc     *process
	starting *startRun // the start running, if one is
	started  time.Time // when the last start ended
	lastErr  error     // why the last process failed to start or exited
	closed   bool
}

var _ portcullis.Model = (*Model)(nil)

// New returns a Model for opts. It starts nothing: the program starts when
// first asked.
func New(opts Options) (*Model, error) {
	switch {
	case opts.Program == "":
		return nil, errors.New("remote: no program given")
	case opts.Config.Provider == "" || strings.TrimSpace(opts.Config.Model) == "":
		return nil, errors.New("remote: the provider and the model are required")
	case opts.Config.Timeout < 0 || opts.StartTimeout < 0 || opts.RestartDelay < 0:
		return nil, errors.New("remote: negative timeout or delay")
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.RestartDelay == 0 {
		opts.RestartDelay = DefaultRestartDelay
	}
	opts.Config.Protocol = Protocol
	return &Model{opts: opts, name: opts.Config.Provider + "/" + opts.Config.Model}, nil
}

// Name returns the provider, "/" and the model, as the provider itself
// names it: "anthropic/claude-haiku-4-5".
func (m *Model) Name() string { return m.name }

// Ask passes p to the program and returns its answer, or the provider's
// error as an *Error. The program exiting under a question is a retryable
// *Error; the caller's context ending abandons the question (the program
// is told to cancel it).
func (m *Model) Ask(ctx context.Context, p portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
	pr, err := m.process(ctx)
	if err != nil {
		return portcullis.ModelAnswer{}, err
	}
	return pr.ask(ctx, m.ids.Add(1), p)
}

// Close ends the program, if it runs, by closing its standard input, and
// waits for it to exit (killing it when it does not within a few seconds).
// Questions asked after Close fail.
func (m *Model) Close() error {
	m.mu.Lock()
	m.closed = true
	run := m.starting
	m.mu.Unlock()
	if run != nil {
		// The start in progress sees closed and ends what it started.
		<-run.done
	}
	m.mu.Lock()
	pr := m.proc
	m.proc = nil
	m.mu.Unlock()
	if pr != nil {
		pr.end()
	}
	return nil
}

// end closes the program's input and waits for it to exit, killing it when
// it does not within a few seconds.
func (pr *process) end() {
	pr.stdin.Close()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-pr.done:
	case <-t.C:
		pr.kill()
		<-pr.done
	}
}

// Pid returns the process id of the running program, 0 when none runs.
func (m *Model) Pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil || m.proc.exited() {
		return 0
	}
	return m.proc.cmd.Process.Pid
}

// process returns the running program, starting it when none runs. The
// start belongs to no one caller: it runs on its own, bounded by
// StartTimeout, and every question that needs it (the one that began it
// too) waits for it only as long as its own context allows, so one caller
// giving up neither ends a start others wait for nor holds them.
func (m *Model) process(ctx context.Context) (*process, error) {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, &Error{msg: m.name + ": the provider program was closed"}
		}
		if m.proc != nil {
			if !m.proc.exited() {
				pr := m.proc
				m.mu.Unlock()
				return pr, nil
			}
			m.lastErr = m.proc.err
			m.proc = nil
		}
		run := m.starting
		if run == nil {
			if m.lastErr != nil && time.Since(m.started) < m.opts.RestartDelay {
				err := m.lastErr
				m.mu.Unlock()
				return nil, err
			}
			if err := ctx.Err(); err != nil {
				m.mu.Unlock()
				return nil, &Error{msg: fmt.Sprintf("%s: request abandoned: %v", m.name, err), cause: err}
			}
			run = &startRun{done: make(chan struct{})}
			m.starting = run
			go m.startOnce(run)
		}
		m.mu.Unlock()
		select {
		case <-run.done:
			if run.err != nil {
				return nil, run.err
			}
		case <-ctx.Done():
			return nil, &Error{msg: fmt.Sprintf("%s: request abandoned while %s started: %v", m.name, Program, ctx.Err()), cause: ctx.Err()}
		}
	}
}

// startRun is one start of the program; err is set before done is closed.
type startRun struct {
	done chan struct{}
	err  error
}

// startOnce starts the program and publishes the outcome: the program, or
// the error that the questions waiting, and those that come within
// RestartDelay of it, get.
func (m *Model) startOnce(run *startRun) {
	pr, err := m.start()
	m.mu.Lock()
	defer func() {
		run.err = err
		m.starting = nil
		close(run.done)
		m.mu.Unlock()
	}()
	if err != nil {
		// RestartDelay counts from the failure: a start that took its
		// whole timeout is not tried again at once.
		m.started, m.lastErr = time.Now(), err
		return
	}
	if m.closed {
		// Close came during the start and waits for it: the program
		// started for nobody is ended before Close returns.
		m.mu.Unlock()
		pr.end()
		m.mu.Lock()
		err = &Error{msg: m.name + ": the provider program was closed"}
		return
	}
	m.started = time.Now()
	m.proc, m.lastErr = pr, nil
}

// process is one run of the program.
type process struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *headBuffer
	kill   func()

	wmu sync.Mutex // one line at a time on stdin
	enc *json.Encoder

	mu      sync.Mutex
	pending map[uint64]chan response
	done    chan struct{} // closed when the program has exited
	err     *Error        // why, once done is closed
}

// start runs the program and waits for its hello, up to StartTimeout.
func (m *Model) start() (*process, error) {
	fail := func(format string, args ...any) *Error {
		return &Error{msg: m.name + ": " + fmt.Sprintf(format, args...)}
	}
	cmd := exec.Command(m.opts.Program)
	env := m.opts.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fail("start %s: %v", m.opts.Program, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fail("start %s: %v", m.opts.Program, err)
	}
	pr := &process{
		name:    m.name,
		cmd:     cmd,
		stdin:   stdin,
		stderr:  &headBuffer{max: stderrKept, key: m.opts.APIKey},
		enc:     json.NewEncoder(stdin),
		pending: map[uint64]chan response{},
		done:    make(chan struct{}),
	}
	cmd.Stderr = pr.stderr
	pr.kill = ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fail("start %s: %v", m.opts.Program, err)
	}
	dec := &lineReader{r: bufio.NewReader(stdout), max: maxLine}
	hi := make(chan error, 1)
	var h hello
	go func() {
		if err := pr.enc.Encode(start{Config: m.opts.Config, APIKey: m.opts.APIKey}); err != nil {
			hi <- err
			return
		}
		hi <- dec.next(&h)
	}()
	t := time.NewTimer(m.opts.StartTimeout)
	defer t.Stop()
	var startErr *Error
	select {
	case err := <-hi:
		switch {
		case err != nil:
			startErr = fail("%s did not start: %v", m.opts.Program, err)
		case h.Error != "":
			startErr = fail("%s", h.Error)
		case h.Protocol != Protocol:
			startErr = fail("%s speaks protocol %d, this gateway %d: install the same version of both: %s", m.opts.Program, h.Protocol, Protocol, Install)
		}
	case <-t.C:
		startErr = fail("%s did not start within %v", m.opts.Program, m.opts.StartTimeout)
	}
	if startErr != nil {
		pr.kill()
		stdin.Close()
		_ = cmd.Wait() // killed: the error is startErr
		startErr.msg += pr.stderr.lines()
		return nil, startErr
	}
	go pr.read(dec)
	return pr, nil
}

// read hands each answer to its question until the program's output ends
// or is not a response; then the program is ended and every question
// still waiting fails.
func (pr *process) read(dec *lineReader) {
	var err error
	for {
		var r response
		if err = dec.next(&r); err != nil {
			break
		}
		pr.mu.Lock()
		ch := pr.pending[r.ID]
		delete(pr.pending, r.ID)
		pr.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
	pr.kill()
	pr.stdin.Close()
	werr := pr.cmd.Wait()
	why := "exited"
	switch {
	case !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
		// The program was ended for what it wrote: its exit says less.
		why = "wrote what is not a response: " + err.Error()
	case werr != nil:
		why = "exited: " + werr.Error()
	case !errors.Is(err, io.EOF):
		why = "wrote what is not a response: " + err.Error()
	}
	pr.mu.Lock()
	pr.err = &Error{msg: fmt.Sprintf("%s: %s %s%s", pr.name, Program, why, pr.stderr.lines()), retryable: true}
	pr.pending = nil
	pr.mu.Unlock()
	close(pr.done)
}

func (pr *process) exited() bool {
	select {
	case <-pr.done:
		return true
	default:
		return false
	}
}

func (pr *process) ask(ctx context.Context, id uint64, p portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
	ch := make(chan response, 1)
	pr.mu.Lock()
	if pr.pending == nil {
		pr.mu.Unlock()
		<-pr.done
		return portcullis.ModelAnswer{}, pr.err
	}
	pr.pending[id] = ch
	pr.mu.Unlock()
	line, err := json.Marshal(request{ID: id, Prompt: toPrompt(p)})
	if err != nil {
		pr.forget(id)
		return portcullis.ModelAnswer{}, &Error{msg: fmt.Sprintf("%s: encode the question: %v", pr.name, err)}
	}
	// The write is bounded by ctx too: a program that stops reading (stuck,
	// or stopped) fills its input's pipe, and a question must still end
	// when its caller's time is up. A question left half written makes
	// the program's input unreadable, so the program is ended; the next
	// question starts it again.
	wrote := make(chan error, 1)
	go func() { wrote <- pr.writeLine(line) }()
	select {
	case err := <-wrote:
		if err != nil {
			// The program has gone: read sees its output end.
			pr.forget(id)
			pr.kill()
			<-pr.done
			return portcullis.ModelAnswer{}, pr.err
		}
	case <-ctx.Done():
		pr.forget(id)
		pr.kill()
		return portcullis.ModelAnswer{}, &Error{msg: fmt.Sprintf("%s: request abandoned: %v", pr.name, ctx.Err()), cause: ctx.Err()}
	}
	select {
	case r := <-ch:
		return r.result(pr.name)
	case <-pr.done:
		select {
		case r := <-ch:
			return r.result(pr.name)
		default:
			return portcullis.ModelAnswer{}, pr.err
		}
	case <-ctx.Done():
		pr.forget(id)
		go pr.write(request{ID: id, Cancel: true}) // a program that has gone cannot be told
		return portcullis.ModelAnswer{}, &Error{msg: fmt.Sprintf("%s: request abandoned: %v", pr.name, ctx.Err()), cause: ctx.Err()}
	}
}

func (pr *process) write(r request) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return pr.writeLine(line)
}

// writeLine writes one line to the program.
func (pr *process) writeLine(line []byte) error {
	pr.wmu.Lock()
	defer pr.wmu.Unlock()
	_, err := pr.stdin.Write(append(line, '\n'))
	return err
}

// forget drops a question's pending answer: an answer that comes later is
// read and discarded.
func (pr *process) forget(id uint64) {
	pr.mu.Lock()
	if pr.pending != nil {
		delete(pr.pending, id)
	}
	pr.mu.Unlock()
}

func (r response) result(name string) (portcullis.ModelAnswer, error) {
	switch {
	case r.Error != nil:
		return portcullis.ModelAnswer{}, r.Error.err()
	case r.Answer != nil:
		return r.Answer.model(), nil
	}
	return portcullis.ModelAnswer{}, &Error{msg: name + ": " + Program + " answered with neither an answer nor an error"}
}

// lineReader reads the program's output, one JSON value a line.
type lineReader struct {
	r   *bufio.Reader
	max int
}

// next decodes the next line that is not blank into v. A line longer than
// max is an error, found without reading the rest of it.
func (l *lineReader) next(v any) error {
	var line []byte
	for {
		chunk, err := l.r.ReadSlice('\n')
		if len(line)+len(chunk) > l.max {
			return fmt.Errorf("a line longer than %d bytes", l.max)
		}
		line = append(line, chunk...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(bytes.TrimSpace(line)) > 0:
			// The last line before the program exited, without its
			// line end.
			return json.Unmarshal(line, v)
		case err != nil:
			return err
		case len(bytes.TrimSpace(line)) == 0:
			line = line[:0]
			continue
		}
		return json.Unmarshal(line, v)
	}
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
	// key is the API key, scrubbed from what is shown even when it has
	// no shape a mask would know.
	key string
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// lines returns ": " and the first lines of what was written, credentials
// masked; "" when nothing was.
func (h *headBuffer) lines() string {
	h.mu.Lock()
	s := strings.TrimSpace(string(h.b))
	h.mu.Unlock()
	if s == "" {
		return ""
	}
	ls := strings.SplitN(s, "\n", 6)
	if len(ls) > 5 {
		ls = ls[:5]
	}
	s = failure.Cut(strings.Join(ls, "; "))
	return ": " + failure.Scrub(s, h.key)
}
