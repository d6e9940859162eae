/* truth_util.h: reading ../shared/truth/truth.json in the tests that check
 * against it (test_load, test_flops, test_accuracy). */
#ifndef EST_TRUTH_UTIL_H
#define EST_TRUTH_UTIL_H

#include <stdbool.h>

#include <cJSON.h>

#include "test_util.h"

/* Parses TRUTH_DIR/truth.json. When the file is absent it prints a SKIP
 * line, sets *absent and returns NULL (the test then exits 77); a file that
 * does not parse is a failed check and NULL. The caller frees the result
 * with cJSON_Delete. */
static inline cJSON *test_load_truth(const char *truth_dir, bool *absent) {
    char path[4096];
    snprintf(path, sizeof path, "%s/truth.json", truth_dir);
    char *text = test_read_file(path, NULL);
    *absent = text == NULL;
    if (!text) {
        printf("SKIP: %s not found\n", path);
        return NULL;
    }
    cJSON *truth = cJSON_Parse(text);
    free(text);
    CHECK(truth != NULL, "%s does not parse", path);
    return truth;
}

#endif
