/* test_platform_host.c — the host offers the platform layer to plugins: the
 * service "orakul.platform/1" is built in (no registration), is the platform
 * layer's own table, and an unknown revision is not it. */
#include "platform/platform.h"
#include "plugin/host.h" /* ork_host_get_service */

#include "ork_test.h"

static void test_offered(void) {
    const ork_platform_api *api = ork_host_get_service(ORK_SERVICE_PLATFORM);
    CU_ASSERT_PTR_NOT_NULL_FATAL(api);
    CU_ASSERT_PTR_EQUAL(api, ork_platform_api_table());
    CU_ASSERT_EQUAL(api->abi.major, ORK_ABI_MAJOR);
    CU_ASSERT(api->cpu_count() >= 1);
    CU_ASSERT_PTR_NULL(ork_host_get_service("orakul.platform/2"));
    CU_ASSERT_PTR_NULL(ork_host_get_service("orakul.platform"));
}

static const ork_test_case cases[] = {
    {"orakul.platform/1 is built into the host", test_offered},
    {NULL, NULL},
};

ORK_TEST_MAIN("platform_host", NULL, NULL, cases)
