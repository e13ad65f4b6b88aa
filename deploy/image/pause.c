/*
 * The sandbox ("pause") container of every pod on the e2e node: it holds the pod's namespaces open, reaps the
 * zombies of a shared PID namespace, and exits cleanly on SIGTERM or SIGINT. deploy/e2e/image.sh builds it with
 * `gcc -static -O2` into a one-file image, so no registry is needed for containerd's CRI `sandbox_image`.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("vcpilot pause 1");
    return 0;
  }
  if (getpid() != 1)
    fputs("pause: not PID 1, so orphans of the pod are reaped elsewhere\n", stderr);

  /* Take the signals synchronously: no handler runs between two system calls, so nothing races. */
  sigset_t wanted;
  sigemptyset(&wanted);
  sigaddset(&wanted, SIGCHLD);
  sigaddset(&wanted, SIGTERM);
  sigaddset(&wanted, SIGINT);
  if (sigprocmask(SIG_BLOCK, &wanted, NULL) != 0) {
    perror("pause: sigprocmask");
    return 1;
  }
  for (;;) {
    int sig = sigwaitinfo(&wanted, NULL);
    if (sig < 0) {
      if (errno == EINTR)
        continue;
      perror("pause: sigwaitinfo");
      return 1;
    }
    if (sig == SIGTERM || sig == SIGINT)
      return 0;
    /* SIGCHLD: several children may have died behind one pending signal, so reap until none is left. */
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
  }
}
