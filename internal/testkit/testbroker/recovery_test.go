package testbroker

import "testing"

func TestClassicRecoveryReadsTheLastLine(t *testing.T) {
	log := "2026-12-02 05:10:51 [info] <0.471.0> Recovering 4 queues of type rabbit_classic_queue took 1097ms\n" +
		"2026-12-02 05:10:52 [info] <0.471.0> Recovering 0 queues of type rabbit_quorum_queue took 0ms\n" +
		"2026-12-02 05:11:32 [info] <0.438.0> Recovering 7 queues of type rabbit_classic_queue took 31ms\n"
	line, n, ok := ClassicRecovery(log)
	if !ok || n != 7 || line != "2026-12-02 05:11:32 [info] <0.438.0> Recovering 7 queues of type rabbit_classic_queue took 31ms" {
		t.Errorf("ClassicRecovery = %q, %d, %v; want the 7-queue line", line, n, ok)
	}
	if _, _, ok := ClassicRecovery("Recovering 0 queues of type rabbit_quorum_queue took 0ms\n"); ok {
		t.Error("found a classic recovery line in a log without one")
	}
}
