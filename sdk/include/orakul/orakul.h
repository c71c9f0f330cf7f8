/* orakul/orakul.h — everything a plugin needs, in one include. */
#ifndef ORAKUL_ORAKUL_H
#define ORAKUL_ORAKUL_H
#include <orakul/abi.h>
#include <orakul/dtype.h>
#include <orakul/plugin.h>
#include <orakul/tensor.h>
#include <orakul/ops.h>
#include <orakul/model.h>
#include <orakul/loss.h>
#include <orakul/optimizer.h>
#include <orakul/quant.h>
#include <orakul/safetensors.h>
#include <orakul/text_encoder.h>
#include <orakul/tokenizer.h>
#include <orakul/codec.h>
#endif
