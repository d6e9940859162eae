/* cli_json.h: the JSON reports of the memest command in the CLI test
 * executables that read them (test_cli, test_cli_training): a field checked
 * for its type, and memest's output parsed. */
#ifndef EST_CLI_JSON_H
#define EST_CLI_JSON_H

#include <cJSON.h>

#include "cli_util.h"

static inline const cJSON *field(const cJSON *o, const char *name, int type_check(const cJSON *), const char *ctx) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    CHECK(v && type_check(v), "%s: field '%s' missing or of the wrong type", ctx, name);
    return v;
}

static inline int is_number(const cJSON *v) { return cJSON_IsNumber(v); }
static inline int is_string(const cJSON *v) { return cJSON_IsString(v); }
static inline int is_array(const cJSON *v) { return cJSON_IsArray(v); }
static inline int is_object(const cJSON *v) { return cJSON_IsObject(v); }

/* memest ARGS, which must exit 0 and print JSON: the parsed report (the
 * caller frees it), or NULL after a failed check naming `what`. */
static inline cJSON *run_json(const char *args, const char *what) {
    char *out;
    int rc = run(args, false, &out);
    CHECK(rc == 0, "%s: exit %d", what, rc);
    cJSON *root = rc == 0 ? cJSON_Parse(out) : NULL;
    CHECK(rc != 0 || root != NULL, "%s: not valid JSON: %.200s", what, out ? out : "");
    free(out);
    return root;
}

#endif
