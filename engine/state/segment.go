package state

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/edgellmd/edgellmd/engine/model"
)

// On-disk format (all integers little-endian).
//
// A directory holds segment files NNNNNNNN.seg, written append-only, and a
// LOCK file that the process using the directory holds with flock.
//
// Segment header:
//
//	magic "EDLMSEG\x00" | format version u32 | fingerprint length u32 |
//	fingerprint | crc32c u32 of the bytes before it
//
// then records:
//
//	size u32 (of type and payload) | crc32c u32 (of size, type, payload) |
//	type u8 | payload
//
// A page record (type 1) is the page's chained hash (32 bytes) and its KV
// rows (model.AppendKVRows). A snapshot record (type 2) is
//
//	tokens uvarint | pages uvarint | page hashes (32 bytes each) |
//	tail tokens uvarint | tail tokens (int32 each) | flags u8 (1: a KV run
//	after the pages, 2: recurrent state) | [length uvarint | KV rows] |
//	[length uvarint | recurrent state]
//
// A snapshot's pages are written before it, in the same or an earlier
// segment; a page that a newer snapshot needs is copied forward before its
// segment is deleted.
const (
	segMagic      = "EDLMSEG\x00"
	formatVersion = 1
	segSuffix     = ".seg"
	lockName      = "LOCK"

	recPage = 1
	recSnap = 2

	recHeaderBytes = 8
	maxRecordBytes = 1<<31 - 1
	maxFingerprint = 1 << 16

	snapHasTail      = 1
	snapHasRecurrent = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func segName(id int) string { return fmt.Sprintf("%08d%s", id, segSuffix) }

// listSegments returns the ids of the segment files in dir, oldest first.
func listSegments(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), segSuffix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		id, err := strconv.Atoi(name)
		if err != nil || id < 0 {
			continue
		}
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids, nil
}

func appendSegHeader(dst []byte, fingerprint string) []byte {
	start := len(dst)
	dst = append(dst, segMagic...)
	dst = binary.LittleEndian.AppendUint32(dst, formatVersion)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(fingerprint)))
	dst = append(dst, fingerprint...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// errTornHeader: the file ends inside what can be the start of a segment
// header (an empty file among them): a segment whose creation was cut
// short, by a full disk or a kill. It holds no record.
var errTornHeader = errors.New("cut short")

// readSegHeader reads a segment header and returns its fingerprint and
// length in bytes.
func readSegHeader(r io.Reader) (fp string, n int64, err error) {
	var h [16]byte
	if n, err := io.ReadFull(r, h[:]); err != nil {
		start := binary.LittleEndian.AppendUint32([]byte(segMagic), formatVersion)
		if isEOF(err) && bytes.HasPrefix(start, h[:min(n, len(start))]) {
			return "", 0, fmt.Errorf("header: %w after %d bytes", errTornHeader, n)
		}
		return "", 0, fmt.Errorf("header: %w", err)
	}
	if string(h[:8]) != segMagic {
		return "", 0, fmt.Errorf("header: not a cache segment (magic %q)", h[:8])
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != formatVersion {
		return "", 0, fmt.Errorf("header: format version %d, this build reads %d", v, formatVersion)
	}
	fl := binary.LittleEndian.Uint32(h[12:])
	if fl > maxFingerprint {
		return "", 0, fmt.Errorf("header: fingerprint of %d bytes", fl)
	}
	rest := make([]byte, fl+4)
	if n, err := io.ReadFull(r, rest); err != nil {
		if isEOF(err) {
			return "", 0, fmt.Errorf("header: %w after %d bytes", errTornHeader, len(h)+n)
		}
		return "", 0, fmt.Errorf("header: %w", err)
	}
	crc := crc32.Update(crc32.Checksum(h[:], castagnoli), castagnoli, rest[:fl])
	if crc != binary.LittleEndian.Uint32(rest[fl:]) {
		return "", 0, errors.New("header: checksum mismatch")
	}
	return string(rest[:fl]), int64(16 + fl + 4), nil
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// appendRecord appends a record of type typ whose payload the caller
// appends with fill.
func appendRecord(dst []byte, typ byte, fill func([]byte) ([]byte, error)) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, typ)
	dst, err := fill(dst)
	if err != nil {
		return nil, err
	}
	size := len(dst) - start - recHeaderBytes
	if size > maxRecordBytes {
		return nil, fmt.Errorf("record of %d bytes is too large", size)
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(size))
	crc := crc32.Checksum(dst[start:start+4], castagnoli)
	crc = crc32.Update(crc, castagnoli, dst[start+recHeaderBytes:])
	binary.LittleEndian.PutUint32(dst[start+4:], crc)
	return dst, nil
}

// checkRecord verifies a whole record (header included) and returns its
// type and payload.
func checkRecord(rec []byte) (typ byte, payload []byte, err error) {
	if len(rec) < recHeaderBytes+1 {
		return 0, nil, errors.New("record too short")
	}
	size := binary.LittleEndian.Uint32(rec)
	if int64(size) != int64(len(rec)-recHeaderBytes) {
		return 0, nil, fmt.Errorf("record size %d, %d bytes read", size, len(rec)-recHeaderBytes)
	}
	crc := crc32.Update(crc32.Checksum(rec[:4], castagnoli), castagnoli, rec[recHeaderBytes:])
	if crc != binary.LittleEndian.Uint32(rec[4:]) {
		return 0, nil, errors.New("record checksum mismatch")
	}
	return rec[recHeaderBytes], rec[recHeaderBytes+1:], nil
}

// diskLoc is where a whole record (header included) lies.
type diskLoc struct {
	seg  int
	off  int64
	size int64
}

// snapMeta is a snapshot record without its rows.
type snapMeta struct {
	pos   int
	pages []Hash
	tail  []int32
	flags byte
	kv    []byte // encoded tail run (nil when none)
	rec   []byte // encoded recurrent state (nil when none)
}

func appendSnapPayload(dst []byte, pos int, pages []Hash, tail []int32, sn model.Snapshot) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(pos))
	dst = binary.AppendUvarint(dst, uint64(len(pages)))
	for _, h := range pages {
		dst = append(dst, h[:]...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(tail)))
	for _, t := range tail {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(t))
	}
	var flags byte
	var tailRun *model.KVRows
	if len(sn.KV) > len(pages) {
		flags |= snapHasTail
		tailRun = sn.KV[len(pages)]
	}
	if sn.Recurrent != nil {
		flags |= snapHasRecurrent
	}
	dst = append(dst, flags)
	if tailRun != nil {
		b, err := model.AppendKVRows(nil, tailRun)
		if err != nil {
			return nil, err
		}
		dst = binary.AppendUvarint(dst, uint64(len(b)))
		dst = append(dst, b...)
	}
	if sn.Recurrent != nil {
		b := model.AppendRecurrent(nil, sn.Recurrent)
		dst = binary.AppendUvarint(dst, uint64(len(b)))
		dst = append(dst, b...)
	}
	return dst, nil
}

// parseSnap parses a snapshot payload, checking that its parts agree.
func parseSnap(p []byte) (snapMeta, error) {
	var m snapMeta
	fail := func(format string, a ...any) (snapMeta, error) {
		return snapMeta{}, fmt.Errorf("snapshot record: "+format, a...)
	}
	uv := func(what string) (int, bool) {
		v, n := binary.Uvarint(p)
		if n <= 0 || v > uint64(len(p))*PageSize+PageSize {
			return 0, false
		}
		p = p[n:]
		return int(v), true
	}
	var ok bool
	if m.pos, ok = uv("tokens"); !ok {
		return fail("bad token count")
	}
	np, ok := uv("pages")
	if !ok || np != m.pos/PageSize || 32*np > len(p) {
		return fail("%d pages for %d tokens", np, m.pos)
	}
	m.pages = make([]Hash, np)
	for i := range m.pages {
		copy(m.pages[i][:], p[32*i:])
	}
	p = p[32*np:]
	nt, ok := uv("tail")
	if !ok || nt != m.pos-np*PageSize || 4*nt > len(p) {
		return fail("%d tail tokens for %d tokens", nt, m.pos)
	}
	m.tail = make([]int32, nt)
	for i := range m.tail {
		m.tail[i] = int32(binary.LittleEndian.Uint32(p[4*i:]))
	}
	p = p[4*nt:]
	if len(p) < 1 {
		return fail("no flags")
	}
	m.flags, p = p[0], p[1:]
	if m.flags&^(snapHasTail|snapHasRecurrent) != 0 {
		return fail("unknown flags %#x", m.flags)
	}
	if wantTail := nt > 0 || np == 0; wantTail != (m.flags&snapHasTail != 0) {
		return fail("tail run flag does not match %d tail tokens", nt)
	}
	blob := func() ([]byte, bool) {
		v, n := binary.Uvarint(p)
		if n <= 0 || v > uint64(len(p)-n) {
			return nil, false
		}
		b := p[n : n+int(v)]
		p = p[n+int(v):]
		return b, true
	}
	if m.flags&snapHasTail != 0 {
		if m.kv, ok = blob(); !ok {
			return fail("bad tail run length")
		}
	}
	if m.flags&snapHasRecurrent != 0 {
		if m.rec, ok = blob(); !ok {
			return fail("bad recurrent state length")
		}
	}
	if len(p) != 0 {
		return fail("%d bytes after the end", len(p))
	}
	return m, nil
}

// scanStats counts what a scan found.
type scanStats struct {
	records, damaged int
	goodBytes        int64
	truncated        int64 // bytes after the last record that could be read
}

// scanSegment reads the segment at path record by record, verifying each
// checksum, and calls fn for every good record. A record whose checksum
// fails is skipped by its size when the size fits the file (its neighbours
// are checked on their own); a record that runs past the end of the file
// ends the scan. It returns the segment's fingerprint.
func scanSegment(path string, id int, fn func(typ byte, payload []byte, loc diskLoc)) (fp string, st scanStats, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", st, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", st, err
	}
	size := fi.Size()
	br := bufio.NewReaderSize(f, 1<<20)
	fp, off, err := readSegHeader(br)
	if err != nil {
		return "", st, err
	}
	var buf []byte
	for off < size {
		if size-off < recHeaderBytes+1 {
			st.truncated = size - off
			break
		}
		var h [recHeaderBytes]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return fp, st, err
		}
		n := int64(binary.LittleEndian.Uint32(h[:]))
		if n < 1 || n > size-off-recHeaderBytes {
			st.truncated = size - off
			break
		}
		if int64(cap(buf)) < recHeaderBytes+n {
			buf = make([]byte, recHeaderBytes+n)
		}
		rec := buf[:recHeaderBytes+n]
		copy(rec, h[:])
		if _, err := io.ReadFull(br, rec[recHeaderBytes:]); err != nil {
			return fp, st, err
		}
		loc := diskLoc{seg: id, off: off, size: recHeaderBytes + n}
		off += recHeaderBytes + n
		typ, payload, err := checkRecord(rec)
		if err != nil {
			st.damaged++
			continue
		}
		st.records++
		st.goodBytes += loc.size
		fn(typ, payload, loc)
	}
	return fp, st, nil
}

// readRecord reads and verifies the record at loc of the segment in dir.
func readRecord(dir string, loc diskLoc) (typ byte, payload []byte, err error) {
	f, err := os.Open(filepath.Join(dir, segName(loc.seg)))
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	rec := make([]byte, loc.size)
	if _, err := f.ReadAt(rec, loc.off); err != nil {
		return 0, nil, fmt.Errorf("%s at %d: %w", segName(loc.seg), loc.off, err)
	}
	typ, payload, err = checkRecord(rec)
	if err != nil {
		return 0, nil, fmt.Errorf("%s at %d: %w", segName(loc.seg), loc.off, err)
	}
	return typ, payload, nil
}
