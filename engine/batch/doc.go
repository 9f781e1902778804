// Package batch is the one goroutine that runs the model. The model, its
// kernels' worker pool and (on a GPU) its queue serve one caller at a
// time; each sequence slot runs its generation on its own goroutine. The
// Batcher gathers the forward passes the running sequences ask for and
// runs them as one (model.ForwardMulti), so that a decode step reads the
// weights once for every sequence, and runs their other model work (state
// commits, the MTP head, snapshots: Do) one at a time between passes. A
// prompt chunk beside others' decode steps is cut to the pass's time
// budget, predicted from the passes measured so far (passcost.go). A panic
// in a pass breaks the batcher for good (broken.go): the engine's state
// may hold anything after it.
//
// It is not the scheduler (which request runs: engine.Scheduler) nor the
// memory admission (engine/slots); it knows sequences only as
// model.SeqBatch.
package batch
