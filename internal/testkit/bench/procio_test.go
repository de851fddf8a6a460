package bench

import (
	"os"
	"path/filepath"
	"testing"
)

func TestProcIOCountsReadsAndWrites(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := ProcIO(os.Getpid())
	buf := make([]byte, 1)
	for range 10 {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
	}
	d := ProcIO(os.Getpid()).sub(before)
	if d.Reads < 10 || d.Writes < 10 {
		t.Fatalf("ten reads and ten writes counted as %+v", d)
	}
	if (ProcIO(0) != IOCalls{}) {
		t.Fatal("pid 0 gave counts")
	}
}
