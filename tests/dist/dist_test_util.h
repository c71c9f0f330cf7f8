/* dist_test_util.h — what the dist tests share: a free loopback port and the
 * forked probe for GPUs and NCCL. Header-only (static inline): each test takes
 * what it calls, and the CPU tests never link CUDA for the probe they skip. */
#ifndef ORK_DIST_TEST_UTIL_H
#define ORK_DIST_TEST_UTIL_H

#include "cuda/cuda_ctx.h"
#include "dist/nccl_comm.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* A port that was free a moment ago (the kernel's pick). */
static inline int dist_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

/* In a child (CUDA does not survive fork, so the test process never touches it):
 * GPUs visible (capped at 99) + 100 when libnccl loads. */
static inline int dist_probe(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int n = ork_cuda_device_count();
        ork_nccl *nc = NULL;
        int have = n > 0 && ork_nccl_load(&nc) == ORK_OK;
        _exit((n > 99 ? 99 : n) + (have ? 100 : 0));
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}

#endif
