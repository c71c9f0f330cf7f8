/* train/services.h — registers the core's services with the host table
 * ("orakul.tensor/1", "orakul.ops/1", "orakul.safetensors/1") so plugins can
 * look them up. Call once at start-up, before plugins are created. */
#ifndef ORK_TRAIN_SERVICES_H
#define ORK_TRAIN_SERVICES_H

#include <orakul/abi.h>

ork_status ork_services_register(void);

#endif
