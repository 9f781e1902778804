package gpu

import "fmt"

// CopyBandwidth measures the device's memory bandwidth the way a copy
// benchmark does: a device-to-device copy of size bytes, reps times in one
// command buffer, timed by the GPU's timestamps. It returns bytes moved
// (read plus written) per second, the yardstick decode's GB/s is set
// against (decode reads each weight once per token).
func (d *Device) CopyBandwidth(size int64, reps int) (float64, error) {
	if size <= 0 || reps <= 0 {
		return 0, fmt.Errorf("GPU: copy bandwidth of %d bytes x %d", size, reps)
	}
	a, err := d.NewBuffer(size)
	if err != nil {
		return 0, err
	}
	defer a.Free()
	b, err := d.NewBuffer(size)
	if err != nil {
		return 0, err
	}
	defer b.Free()
	run := func(n int) (float64, error) {
		r := d.Begin()
		for i := 0; i < n; i++ {
			r.Copy(b.All(), a.All(), size)
			r.Barrier()
		}
		return r.Submit()
	}
	if _, err := run(1); err != nil { // first touch of the pages
		return 0, err
	}
	sec, err := run(reps)
	if err != nil {
		return 0, err
	}
	if sec <= 0 {
		return 0, fmt.Errorf("GPU %s: the timestamps measured no time", d.info.Name)
	}
	return 2 * float64(size) * float64(reps) / sec, nil
}
