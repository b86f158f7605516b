/* The pod sandbox's one process: it holds the pod's namespaces and waits for its end.
 * It reaps any child that is handed to it (it is PID 1 of the pod) and exits on SIGINT or SIGTERM. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void finish(int signal_number) {
    (void)signal_number;
    _exit(0);
}

static void reap(int signal_number) {
    (void)signal_number;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction stop = {.sa_handler = finish};
    struct sigaction child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    if (sigaction(SIGINT, &stop, NULL) != 0 || sigaction(SIGTERM, &stop, NULL) != 0 ||
        sigaction(SIGCHLD, &child, NULL) != 0) {
        return 1;
    }
    for (;;) {
        pause();
    }
}
