package gateway

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/dirlock"
)

// The meter writes charges to the store in batches, a few milliseconds
// after their requests were answered, and more when the store falls
// behind. Without more, a crash in between loses them: the renter got an
// answer nobody pays for, and the provider is never credited. So the meter
// journals each charge first: a line appended to a file in Config.Journal
// before the request's handler returns, as soon as its answer is done (not
// before the answer's end, which would add the write to every request's
// latency: a crash in between loses that charge). Once the store has the
// charge (or has refused it for good: a renter without the money), its
// line is done; a file whose lines are all done is deleted once the meter
// has moved on to the next. A charge the store fails for a reason of its
// own (it cannot be reached) is tried again by the meter, and a file
// holding one the meter gave up on at Close stays. When the gateway
// starts, New writes the charges in the files it finds to the store before
// it serves: a charge the store already has (its request ID) is not
// charged again, so replaying a file twice, or a line the store had
// committed just before the crash, is harmless. Files New cannot write
// stay for the next start.
//
// One gateway at a time owns a journal: it holds its directory's lock
// (internal/dirlock) while it is open, since a second one would write
// another's live files to the store and delete them under it (two
// servers on one SQLite database, or given the same --meter-journal).
//
// A line reaches the operating system with one write system call and no
// fsync, so a journaled charge survives the process, as a SQLite commit
// in WAL mode with synchronous=NORMAL does, not a power cut.

// journalSegmentBytes is the size at which the meter starts a new file.
// A busy gateway fills one in a second or two; the store catches up
// within milliseconds, so only a file or two is live.
const journalSegmentBytes = 1 << 20

// journalPrefix and journalSuffix name the journal's files:
// meter-<sequence number>.jsonl.
const (
	journalPrefix = "meter-"
	journalSuffix = ".jsonl"
)

// ErrJournalInUse is what opening a journal another gateway has open
// returns.
var ErrJournalInUse = errors.New("the meter journal is in use by another server")

// journal is the meter's journal of charges not yet in the store.
type journal struct {
	dir          string
	lock         *dirlock.Lock // held until close
	log          *slog.Logger
	segmentBytes int64 // journalSegmentBytes, but in tests

	failing atomic.Bool // the last line could not be written

	mu     sync.Mutex
	cur    *segment // the file lines are appended to; nil until the first
	seq    uint64   // the last file's sequence number
	closed bool
}

// segment is one file of the journal.
type segment struct {
	path    string
	f       *os.File // nil once the journal has moved past it
	size    int64
	pending int  // lines appended whose charges are not done
	kept    bool // a charge failed in a way a later start may put right: the file stays
}

// journalLine is a charge as a line of the journal.
type journalLine struct {
	Usage    *idlegrid.InferenceUsage `json:"usage"`
	Transfer *idlegrid.Transfer       `json:"transfer,omitempty"`
}

// openJournal opens the journal in dir, creating dir, and returns the
// charges its files hold and the files, which the caller deletes
// (forget) once the store has them.
func openJournal(dir string, log *slog.Logger) (j *journal, left []idlegrid.InferenceCharge, files []string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, nil, fmt.Errorf("meter journal: %w", err)
	}
	lock, err := dirlock.Take(dir)
	if errors.Is(err, dirlock.ErrHeld) {
		return nil, nil, nil, fmt.Errorf("%w: %w; give each server a --meter-journal of its own, and run one server on a SQLite database", ErrJournalInUse, err)
	} else if err != nil {
		return nil, nil, nil, fmt.Errorf("meter journal: %w", err)
	}
	j = &journal{dir: dir, lock: lock, log: log, segmentBytes: journalSegmentBytes}
	defer func() {
		if err != nil {
			j.close()
		}
	}()
	names, err := j.files()
	if err != nil {
		return nil, nil, nil, err
	}
	for _, name := range names {
		cs, err := j.read(name)
		if err != nil {
			return nil, nil, nil, err
		}
		left = append(left, cs...)
		files = append(files, filepath.Join(dir, name))
		j.seq = max(j.seq, journalSeq(name))
	}
	return j, left, files, nil
}

// files lists the journal's files, oldest first.
func (j *journal) files() ([]string, error) {
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, fmt.Errorf("meter journal: %w", err)
	}
	var names []string
	for _, e := range entries {
		if name := e.Name(); e.Type().IsRegular() && journalSeq(name) > 0 {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(journalSeq(a), journalSeq(b)) })
	return names, nil
}

// journalSeq is the sequence number a journal file's name carries, or 0
// when name is not one.
func journalSeq(name string) uint64 {
	rest, named := strings.CutPrefix(name, journalPrefix)
	digits, ok := strings.CutSuffix(rest, journalSuffix)
	if !named || !ok {
		return 0
	}
	n, err := strconv.ParseUint(digits, 10, 63)
	if err != nil {
		return 0
	}
	return n
}

// read returns the charges of one file. A line that does not decode (the
// last, torn by a power cut) is skipped with a warning.
func (j *journal) read(name string) ([]idlegrid.InferenceCharge, error) {
	f, err := os.Open(filepath.Join(j.dir, name))
	if err != nil {
		return nil, fmt.Errorf("meter journal: %w", err)
	}
	defer f.Close()
	var cs []idlegrid.InferenceCharge
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var l journalLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Usage == nil {
			j.log.Warn("gateway: skipped a line of the meter journal that does not decode", "file", name, "line", n, "err", err)
			continue
		}
		cs = append(cs, idlegrid.InferenceCharge{Usage: l.Usage, Transfer: l.Transfer})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("meter journal %s: %w", name, err)
	}
	return cs, nil
}

// forget deletes files whose charges the store has.
func forget(files []string) error {
	var errs []error
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// append journals a charge and returns its file, to be told when the
// charge is done; nil when the line could not be written: the charge then
// lives in memory only, as without a journal. The first failure of a
// spell is logged, and the journal's working again.
func (j *journal) append(c idlegrid.InferenceCharge) *segment {
	line, err := json.Marshal(journalLine{Usage: c.Usage, Transfer: c.Transfer})
	var s *segment
	if err == nil {
		s, err = j.write(append(line, '\n'))
	}
	switch {
	case err != nil && j.failing.CompareAndSwap(false, true):
		j.log.Error("gateway: could not journal an inference charge; until the journal works again, charges are lost if the server stops before the store has them",
			"dir", j.dir, "request", c.Usage.ID, "err", err)
	case err == nil && j.failing.Load() && j.failing.CompareAndSwap(true, false):
		j.log.Info("gateway: the meter journal works again", "dir", j.dir)
	}
	return s
}

func (j *journal) write(line []byte) (*segment, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil, errors.New("meter journal closed")
	}
	if j.cur == nil || j.cur.size >= j.segmentBytes {
		if err := j.rotate(); err != nil {
			return nil, err
		}
	}
	n, err := j.cur.f.Write(line)
	j.cur.size += int64(n)
	if err != nil {
		j.cur.size = j.segmentBytes // a torn line must not run into the next: start a new file
		return nil, fmt.Errorf("meter journal: %w", err)
	}
	j.cur.pending++
	return j.cur, nil
}

// rotate starts the next file, in a directory made again if someone
// removed it. The one before it goes once its charges are done.
func (j *journal) rotate() error {
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return fmt.Errorf("meter journal: %w", err)
	}
	var path string
	var f *os.File
	for err := os.ErrExist; err != nil; { // a number someone else took is passed over
		j.seq++
		path = filepath.Join(j.dir, fmt.Sprintf("%s%020d%s", journalPrefix, j.seq, journalSuffix))
		if f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("meter journal: %w", err)
		}
	}
	if old := j.cur; old != nil {
		j.retire(old)
	}
	j.cur = &segment{path: path, f: f}
	return nil
}

// retire closes a file the journal moved past, and deletes it when its
// charges are done.
func (j *journal) retire(s *segment) {
	if s.f != nil {
		if err := s.f.Close(); err != nil {
			j.log.Warn("gateway: close a meter journal file", "file", s.path, "err", err)
		}
		s.f = nil
	}
	if s.pending == 0 && !s.kept {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			j.log.Warn("gateway: delete a meter journal file", "file", s.path, "err", err)
		}
	}
}

// done tells the journal a charge of s is done: the store has it or
// refused it for good; kept, it failed otherwise (the store could not be
// reached, say), and s stays for the next start to write.
func (j *journal) done(s *segment, kept bool) {
	if j == nil || s == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	s.pending--
	s.kept = s.kept || kept
	if s != j.cur && s.pending == 0 {
		j.retire(s)
	}
}

// close closes the current file, deleting it if its charges are done.
// The meter has written every charge by then.
func (j *journal) close() {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return
	}
	j.closed = true
	if j.cur != nil {
		j.retire(j.cur)
		j.cur = nil
	}
	if err := j.lock.Release(); err != nil {
		j.log.Warn("gateway: unlock the meter journal", "file", j.lock.Path(), "err", err)
	}
}

// replay writes the charges a crash left in the journal to the store, in
// batches as the meter does (recordCharges, which gives up on a store that
// hangs). A charge more than its renter has is charged what the renter has
// (capped; chargeWhatIsLeft), as the meter would have; one the store
// refuses for good (nothing is left) is logged and dropped; a store fault
// stops the replay, and the caller keeps the files.
func replay(ctx context.Context, s idlegrid.InferenceStore, cs []idlegrid.InferenceCharge, ms *metrics, log *slog.Logger,
	capped func(idlegrid.InferenceCharge) (idlegrid.InferenceCharge, bool)) error {
	refused := 0
	for batch := range slices.Chunk(cs, meterBatch) {
		for i, err := range recordCharges(ctx, s, batch) {
			if idlegrid.ErrorCode(err) == idlegrid.EPAYMENT {
				_, err = chargeWhatIsLeft(ctx, s, capped, batch[i], err, ms, log)
			}
			switch {
			case err == nil:
			case storeFault(err):
				return fmt.Errorf("gateway: write the charges in the meter journal to the store: %w", err)
			default:
				refused++
				ms.chargesLost.Inc()
				log.Error("gateway: the store refused an inference charge from the meter journal", "request", batch[i].Usage.ID,
					"renter", batch[i].Usage.RenterID, "charge", batch[i].Usage.ChargeMicros, "err", err)
			}
		}
	}
	log.Info("gateway: wrote the charges left in the meter journal", "charges", len(cs), "refused", refused)
	return nil
}
