package inbox

import "errors"

// The errors NewWorker and Run return, for errors.Is. Each returned error wraps one of them.
var (
	// ErrInvalidOptions: an option breaks its rule (PULL-56). The error's text is the exact
	// message of pull.md §9 for that rule, which every QueueBox client shares (PULL-C28), so it
	// keeps the specification's capital letter and full stop.
	ErrInvalidOptions = errors.New("inbox: invalid options")
	// ErrUnsupportedDialect: the dialect is valid, but this version ships no SQL for it (sqlserver).
	ErrUnsupportedDialect = errors.New("inbox: dialect not supported by this version")
	// ErrNoConnSource: NewWorker was given a nil ConnSource.
	ErrNoConnSource = errors.New("inbox: the connection source is nil")
	// ErrNoHandler: NewWorker was given a nil Handler.
	ErrNoHandler = errors.New("inbox: the handler is nil")
	// ErrAlreadyRunning: Run was called while another Run of the same worker is active.
	ErrAlreadyRunning = errors.New("inbox: the worker is already running")
	// ErrInvalidRetryPolicy: NewExponentialPolicy was given parameters that break PULL-60.
	ErrInvalidRetryPolicy = errors.New("inbox: invalid retry policy")
)

// optionsError is a PULL-56 validation failure: its text is the specification's exact message.
type optionsError struct{ message string }

func (e *optionsError) Error() string { return e.message }

// Is makes errors.Is(err, ErrInvalidOptions) true.
func (e *optionsError) Is(target error) bool { return target == ErrInvalidOptions }

func invalidOption(message string) error { return &optionsError{message} }
