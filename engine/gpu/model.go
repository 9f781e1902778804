package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/model"
)

// Load builds the GPU twin of a model that model.Load made (the CPU model
// names, checks and maps the weights; this copies them to the device). The
// result implements model.Model; its states live on the device.
func Load(dev *Device, cpu model.Model) (model.Model, error) {
	if _, err := model.Describe(cpu); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("GPU %s: the GPU forward pass is not built yet", dev.info.Name)
}
