/*
 * replay_main: runs a fuzz harness's LLVMFuzzerTestOneInput on files, without
 * libFuzzer, so every committed corpus file and crasher runs in the ordinary
 * test suite (any compiler, under ASan or valgrind when the build has them).
 *
 * usage: replay_HARNESS PATH...   (a PATH that is a folder means its files;
 *                                  a missing folder is skipped)
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 1;
    }
    size_t cap = 4096, n = 0, got;
    unsigned char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            unsigned char *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        return 1;
    }
    /* Exactly n bytes, like libFuzzer: a copy so ASan sees reads past the end. */
    unsigned char *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return 1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file in `dir` in name order; hidden files are skipped. */
static int run_dir(const char *dir, long *count) {
    DIR *d = opendir(dir);
    if (!d) {
        printf("note: %s: no such folder, skipped\n", dir);
        return 0;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char **grown = realloc(names, (n + 1) * sizeof *names);
        if (!grown) break;
        names = grown;
        if ((names[n] = strdup(e->d_name))) n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_names);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            bad |= run_file(path);
            ++*count;
        }
        free(names[i]);
    }
    free(names);
    return bad;
}

int main(int argc, char **argv) {
    long count = 0;
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) bad |= run_dir(argv[i], &count);
        else if (stat(argv[i], &sb) == 0) {
            bad |= run_file(argv[i]);
            count++;
        } else printf("note: %s: not found, skipped\n", argv[i]);
    }
    printf("%s: replayed %ld inputs\n", argv[0], count);
    return bad;
}
