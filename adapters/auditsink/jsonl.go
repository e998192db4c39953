// Package auditsink holds the audit export's destinations (auditexport.Sink): RFC 5424
// syslog over TCP with octet-counting framing (RFC 6587), TLS optional, and a JSON Lines
// file.
package auditsink

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/apelora/fabric/domain/auditexport"
)

// JSONL appends each event as one line of JSON to a file. A batch is acknowledged once
// written and synced to disk (fsync). A line left half-written by a crash is cut off when
// the file is opened again, and sent again whole (it was never acknowledged). A file
// renamed or removed (logrotate) is followed by a new one at the path.
type JSONL struct {
	Path string
	f    *os.File
}

var _ auditexport.Sink = (*JSONL)(nil)

func (j *JSONL) Name() string { return "jsonl " + j.Path }
func (j *JSONL) Kind() string { return "jsonl" }

func (j *JSONL) Deliver(ctx context.Context, lines [][]byte) error {
	if j.f != nil && j.rotated() {
		// logrotate moved the file away: write to a new one at the path.
		j.Close()
	}
	if j.f == nil {
		f, err := os.OpenFile(j.Path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			return fmt.Errorf("open the audit export file: %w", err)
		}
		if err := cutPartialLine(f); err != nil {
			f.Close()
			return fmt.Errorf("repair the audit export file %s: %w", j.Path, err)
		}
		j.f = f
	}
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	if _, err := j.f.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write the audit export file %s: %w", j.Path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("sync the audit export file %s: %w", j.Path, err)
	}
	return nil
}

// rotated says whether the path no longer names the open file (renamed or removed).
func (j *JSONL) rotated() bool {
	open, err := j.f.Stat()
	if err != nil {
		return true
	}
	now, err := os.Stat(j.Path)
	return err != nil || !os.SameFile(open, now)
}

func (j *JSONL) Close() error {
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// cutPartialLine truncates f after its last newline when it does not end with one.
func cutPartialLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	end := st.Size()
	buf := make([]byte, 64*1024)
	for pos := end; pos > 0; {
		n := int64(len(buf))
		if n > pos {
			n = pos
		}
		pos -= n
		if _, err := f.ReadAt(buf[:n], pos); err != nil && err != io.EOF {
			return err
		}
		if pos+n == end && buf[n-1] == '\n' {
			return nil // ends with a whole line
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return f.Truncate(pos + int64(i) + 1)
		}
	}
	return f.Truncate(0)
}
