//go:build !wip_model

package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Load builds the GPU twin of a model that model.Load made, with act the
// arithmetic of products with NVFP4 weights (as the CPU pool has it).
// (Stand-in while the forward pass is built.)
func Load(dev *Device, cpu model.Model, act tensor.NVFP4Activations) (model.Model, error) {
	if _, err := model.Describe(cpu); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("GPU %s: the GPU forward pass is not built yet", dev.info.Name)
}
