/*
 * tests/unit/check_main.c — the runner shared by every unit suite: each
 * tests/unit/test_*.c defines test_suite() and is linked with this file into
 * its own binary, so suites build and fail independently.
 */
#include <check.h>

#include "kernels/backend.h"
#include <stdlib.h>

Suite *test_suite(void);

int main(int argc, char **argv)
{
    (void)argc;
    be_process_init(argv);
    SRunner *sr = srunner_create(test_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
