/* tests/plugin/test_model_decl.c — the model's declarations (orakul/model.h,
 * ABI 1.3) as the core reads them (core/plugin/model_decl.h): the defaults
 * for a model that declares nothing (an ABI 1.2 plugin: no family names, the
 * generic block layout, flow matching with the resolution shift), the
 * declared values taking over, and the check of malformed declarations. */
#include "ork_test.h"

#include "plugin/model_decl.h"

#include <CUnit/CUnit.h>
#include <string.h>

static const char *const bn[5] = {"a", "b", "c", "d", "e"};

static void base_info(ork_model_info *i, ork_weight_decl *w) {
    memset(i, 0, sizeof *i);
    i->n_blocks = 5;
    i->block_names = bn;
    /* a linear in block 0, 2 and 4; a norm in block 2 */
    w[0] = (ork_weight_decl){"in.weight", 2, {8, 4}, 0, ORK_WEIGHT_LINEAR | ORK_WEIGHT_TOKENS(ORK_TOKENS_IMG)};
    w[1] = (ork_weight_decl){"body.q.weight", 2, {8, 8}, 2, ORK_WEIGHT_LINEAR | ORK_WEIGHT_TOKENS(ORK_TOKENS_TXT)};
    w[2] = (ork_weight_decl){"body.norm.scale", 1, {8}, 2, ORK_WEIGHT_NORM};
    w[3] = (ork_weight_decl){"out.weight", 2, {4, 8}, 4, ORK_WEIGHT_LINEAR};
    i->n_weights = 4;
    i->weights = w;
}

/* A 1.2 model (struct_size up to source_dir, or 0): the defaults, whatever
 * bits its weights carry. */
static void test_defaults(void) {
    ork_model_info i;
    ork_weight_decl w[4];
    base_info(&i, w);
    i.abi.struct_size = (uint32_t)offsetof(ork_model_info, n_text_slots);
    CU_ASSERT_FALSE(ork_model_info_has_blocks(&i));
    CU_ASSERT_EQUAL(ork_model_block_kind(&i, 0), ORK_BLOCK_KIND_INPUT);
    for (int b = 1; b < 4; b++) CU_ASSERT_TRUE(ork_model_block_is_transformer(&i, b));
    CU_ASSERT_EQUAL(ork_model_block_kind(&i, 4), ORK_BLOCK_KIND_OUTPUT);
    CU_ASSERT_EQUAL(ork_model_weight_tokens(&i, &w[0]), ORK_TOKENS_JOINT); /* bits ignored */
    CU_ASSERT_EQUAL(ork_model_weight_tokens(&i, &w[1]), ORK_TOKENS_JOINT);
    CU_ASSERT_TRUE(ork_model_weight_marks_attention(&i, &w[2]));  /* a transformer block */
    CU_ASSERT_FALSE(ork_model_weight_marks_attention(&i, &w[0]));
    CU_ASSERT_TRUE(ork_model_lora_default_target(&i, &w[1], "body.q"));
    CU_ASSERT_FALSE(ork_model_lora_default_target(&i, &w[0], "in"));
    CU_ASSERT_FALSE(ork_model_lora_default_target(&i, &w[3], "out"));
    CU_ASSERT_PTR_NULL(ork_model_lora_prefix(&i));
    ork_model_schedule s;
    double b, m;
    ork_model_schedule_get(&i, &s, &b, &m);
    CU_ASSERT(s.prediction == ORK_PREDICT_FLOW && s.noise == ORK_NOISE_FLOW && s.time_shift == ORK_TIME_SHIFT_RESOLUTION);
    CU_ASSERT(s.shift == 3.0 && s.shift_base_seq == 256 && s.shift_max_seq == 4096 && s.sample_steps == 0);
    CU_ASSERT(b == 0.5 && m == 1.15);
    CU_ASSERT_PTR_NULL(ork_model_timestep_type(&i));
    i.shift_base = 0.7;
    ork_model_schedule_get(&i, &s, &b, &m);
    CU_ASSERT(b == 0.7);
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_OK);
    CU_ASSERT_EQUAL(ork_model_decl_trainable(&i, "t"), ORK_OK);
    /* fewer than 3 blocks: all transformer */
    i.n_blocks = 2;
    CU_ASSERT_TRUE(ork_model_block_is_transformer(&i, 0) && ork_model_block_is_transformer(&i, 1));
}

/* A 1.3 model: its blocks, tokens, attention marks, targets, prefix and schedule. */
static void test_declared(void) {
    ork_model_info i;
    ork_weight_decl w[4];
    base_info(&i, w);
    i.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    ork_block_decl bd[5] = {{ORK_BLOCK_KIND_INPUT, 0, 0}, {ORK_BLOCK_KIND_OTHER, 0, 0},
                            {ORK_BLOCK_KIND_TRANSFORMER, ORK_TOKENS_IMG, 64}, {ORK_BLOCK_KIND_TRANSFORMER, 0, 0},
                            {ORK_BLOCK_KIND_OUTPUT, 0, 0}};
    static const char *const targets[] = {"q", NULL};
    ork_model_schedule sc = {.abi = ORK_ABI_INIT(ork_model_schedule), .prediction = ORK_PREDICT_FLOW,
                             .time_shift = ORK_TIME_SHIFT_FIXED, .shift = 2.0, .sample_steps = 8,
                             .sample_flags = ORK_SAMPLE_NO_CFG};
    i.blocks = bd;
    i.lora_targets = targets;
    i.lora_prefix = "transformer.";
    i.schedule = &sc;
    w[1].flags |= ORK_WEIGHT_ATTN;
    CU_ASSERT_TRUE(ork_model_info_has_blocks(&i));
    CU_ASSERT_FALSE(ork_model_block_is_transformer(&i, 1));
    CU_ASSERT_EQUAL(ork_model_weight_tokens(&i, &w[0]), ORK_TOKENS_IMG);
    CU_ASSERT_EQUAL(ork_model_weight_tokens(&i, &w[1]), ORK_TOKENS_TXT);
    CU_ASSERT_EQUAL(ork_model_weight_tokens(&i, &w[3]), ORK_TOKENS_JOINT);
    CU_ASSERT_TRUE(ork_model_weight_marks_attention(&i, &w[1]));
    CU_ASSERT_FALSE(ork_model_weight_marks_attention(&i, &w[2])); /* declared: only ORK_WEIGHT_ATTN */
    CU_ASSERT_EQUAL(ork_model_block_attn_tokens(&i, 2), ORK_TOKENS_IMG);
    CU_ASSERT_EQUAL(ork_model_block_attn_dim(&i, 2), 64);
    CU_ASSERT_TRUE(ork_model_lora_default_target(&i, &w[1], "body.q"));
    CU_ASSERT_FALSE(ork_model_lora_default_target(&i, &w[3], "out"));
    CU_ASSERT_TRUE(ork_module_contains("double_blocks.0.img_attn.qkv", "double_blocks_0"));
    CU_ASSERT_STRING_EQUAL(ork_model_lora_prefix(&i), "transformer.");
    ork_model_schedule s;
    double b, m;
    ork_model_schedule_get(&i, &s, &b, &m);
    CU_ASSERT(s.time_shift == ORK_TIME_SHIFT_FIXED && s.shift == 2.0 && s.sample_steps == 8);
    CU_ASSERT(s.sample_flags == ORK_SAMPLE_NO_CFG && s.shift_base_seq == 256);
    CU_ASSERT_PTR_NULL(ork_model_timestep_type(&i)); /* 0: the config's */
    sc.timestep_sampling = ORK_TIMESTEPS_SHIFT;
    CU_ASSERT_STRING_EQUAL(ork_model_timestep_type(&i), "shift");
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_OK);
    /* epsilon with a discrete SDXL schedule is expressible and well-formed, not trainable yet */
    sc.prediction = ORK_PREDICT_EPSILON;
    sc.noise = ORK_NOISE_DISCRETE;
    sc.beta_schedule = ORK_BETAS_SCALED_LINEAR;
    sc.beta_start = 0.00085;
    sc.beta_end = 0.012;
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_OK);
    ork_model_schedule_get(&i, &s, &b, &m);
    CU_ASSERT_EQUAL(s.train_timesteps, 1000);
    CU_ASSERT_EQUAL(ork_model_decl_trainable(&i, "t"), ORK_E_UNSUPPORTED);
}

/* Malformed declarations: one ORK_E_ABI each. */
static void test_malformed(void) {
    ork_model_info i;
    ork_weight_decl w[4];
    base_info(&i, w);
    i.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    ork_block_decl bd[5] = {{0, 0, 0}};
    ork_model_schedule sc = {.abi = ORK_ABI_INIT(ork_model_schedule)};
    i.blocks = bd;
    i.schedule = &sc;
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_OK);
    bd[3].kind = 9;
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_E_ABI);
    bd[3].kind = 0;
    bd[1].attn_tokens = -1;
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_E_ABI);
    bd[1].attn_tokens = 0;
    bd[2].attn_dim = -5;
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_E_ABI);
    bd[2].attn_dim = 0;
    static const char *const empty[] = {NULL}, *const blank[] = {"x", "", NULL};
    i.lora_targets = empty;
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_E_ABI);
    i.lora_targets = blank;
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_E_ABI);
    i.lora_targets = NULL;
    sc.prediction = 7;
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_E_ABI);
    sc.prediction = 0;
    sc.noise = ORK_NOISE_DISCRETE; /* no betas */
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_E_ABI);
    sc.noise = 0;
    sc.timestep_sampling = 5;
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_E_ABI);
    sc.timestep_sampling = 0;
    sc.time_shift = 4;
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_E_ABI);
    sc.time_shift = 0;
    sc.shift_base_seq = 4096;
    sc.shift_max_seq = 256;
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_E_ABI);
    sc.shift_base_seq = sc.shift_max_seq = 0;
    sc.abi.struct_size = 8; /* a truncated schedule */
    CU_ASSERT_EQUAL(ork_model_decl_check(&i, "t"), ORK_E_ABI);
}

static const ork_test_case cases[] = {
    {"a model that declares nothing gets the defaults", test_defaults},
    {"declared blocks, tokens, targets and schedule", test_declared},
    {"malformed declarations are refused", test_malformed},
    {NULL, NULL},
};
ORK_TEST_MAIN("model_decl", NULL, NULL, cases)
