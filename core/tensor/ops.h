/* tensor/ops.h — the core's implementations of the SDK service tables
 * "orakul.ops/1" (every op of <orakul/ops.h>) and "orakul.tensor/1"
 * (<orakul/tensor.h>). The service registry hands these to plugins.
 * Owns: the two static tables. [control-thread] */
#ifndef ORK_TENSOR_OPS_H
#define ORK_TENSOR_OPS_H

#include <orakul/ops.h>
#include <orakul/tensor.h>

const ork_ops *ork_ops_table(void);
const ork_tensor_api *ork_tensor_api_table(void);

#endif
