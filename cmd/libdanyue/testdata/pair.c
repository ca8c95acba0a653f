/* The pairing flow of an app on libdanyue, as the README shows it: two
 * nodes in one process (an inviting laptop, a joining phone), a short code
 * shown, typed, followed to "paired"; a long code; a join cancelled from
 * another thread; a log sink. It prints one "key: value" line per result for
 * the Go test to check.
 *
 * usage: pair DATADIR_LAPTOP DATADIR_PHONE DATADIR_TABLET
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libdanyue.h"

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int log_lines;

/* The log sink: the library calls it one line at a time, from its threads. */
static void on_log(int level, const char* line, void* ctx) {
	pthread_mutex_lock(&log_mu);
	log_lines++;
	if (level >= 4) { /* warn and error */
		fprintf(stderr, "%s: %s\n", (const char*)ctx, line);
	}
	pthread_mutex_unlock(&log_mu);
}

/* take returns s as the caller's string and frees the library's copy. */
static char* take(char* s) {
	char* out = strdup(s ? s : "(null)");
	danyue_free(s);
	return out;
}

struct join {
	int node;
	char* code;
	char* pair_addr;
	char* library; /* NULL if the join failed */
	char* error_code;
};

/* join_thread runs the blocking danyue_join, as an app does off its UI thread. */
static void* join_thread(void* arg) {
	struct join* j = arg;
	j->library = danyue_join(j->node, j->code, j->pair_addr);
	if (!j->library) {
		j->error_code = take(danyue_last_error_code());
	}
	return NULL;
}

/* loopback returns 127.0.0.1 with the port of the first of addrs. */
static char* loopback(const char* addrs) {
	static char out[64];
	const char* comma = strchr(addrs, ',');
	size_t n = comma ? (size_t)(comma - addrs) : strlen(addrs);
	const char* colon = addrs + n;
	while (colon > addrs && *colon != ':') {
		colon--;
	}
	snprintf(out, sizeof out, "127.0.0.1%.*s", (int)(addrs + n - colon), colon);
	return out;
}

int main(int argc, char** argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: pair DATADIR_LAPTOP DATADIR_PHONE DATADIR_TABLET\n");
		return 2;
	}
	/* C leaves the order of a call's arguments open: each call that sets
	 * the last error is a statement before the one that reads it. */
	int rc = danyue_set_log("loud", NULL, NULL);
	printf("bad level: %d %s\n", rc, take(danyue_last_error()));
	printf("set log: %d\n", danyue_set_log("info", on_log, "danyue"));

	/* Loopback only and no LAN discovery: a test talks to nothing else. */
	int laptop = danyue_start_opts(argv[1], "laptop", NULL, "/ip4/127.0.0.1/tcp/0", NULL, 1);
	int phone = danyue_start_opts(argv[2], "phone", NULL, "/ip4/127.0.0.1/tcp/0", NULL, 1);
	int tablet = danyue_start_opts(argv[3], "tablet", NULL, "/ip4/127.0.0.1/tcp/0", NULL, 1);
	if (laptop < 0 || phone < 0 || tablet < 0) {
		printf("start failed: %s\n", take(danyue_last_error()));
		return 1;
	}

	/* The laptop shows a short code; the phone's user types it. */
	char *code = NULL, *addrs = NULL, *detail = NULL;
	char* id = danyue_pair_open(laptop, &code, &addrs);
	if (!id) {
		printf("pair open failed: %s\n", take(danyue_last_error()));
		return 1;
	}
	char* state = danyue_pair_wait(laptop, id, 0, NULL); /* 0: as it is now */
	printf("opened: %s\n", take(state));

	/* Multicast is off here, so the phone is told where the laptop waits;
	 * on a LAN an app passes NULL and the phone finds the laptop. */
	struct join j = {.node = phone, .code = code, .pair_addr = strdup(loopback(addrs))};
	danyue_free(addrs);
	pthread_t t;
	pthread_create(&t, NULL, join_thread, &j);
	state = danyue_pair_wait(laptop, id, -1, &detail); /* -1: until it ends */
	pthread_join(t, NULL);
	char* d = take(detail);
	printf("inviter: %s %s\n", take(state), strstr(d, "phone") ? "phone joined" : d);
	printf("joiner: %s\n", j.library ? "joined" : j.error_code);
	danyue_free(j.library);
	danyue_free(id);

	/* The code worked once. */
	struct join again = {.node = tablet, .code = code, .pair_addr = j.pair_addr};
	join_thread(&again);
	printf("spent code: %s\n", again.library ? "joined" : again.error_code);
	danyue_free(code);

	/* A pairing cancelled while its code is shown. */
	char* id3 = danyue_pair_open(laptop, NULL, NULL);
	printf("cancel: %d\n", danyue_pair_cancel(laptop, id3));
	state = danyue_pair_wait(laptop, id3, 1000, NULL);
	printf("cancelled: %s\n", take(state));
	danyue_free(id3);

	/* The long code: no LAN meeting, any number of uses. */
	char* long_code = danyue_invite(laptop);
	struct join l = {.node = tablet, .code = long_code};
	join_thread(&l);
	printf("long code: %s %s\n", strncmp(long_code, "danyue1-", 8) == 0 ? "danyue1-" : long_code, l.library ? "joined" : l.error_code);
	danyue_free(long_code);
	danyue_free(l.library);

	/* Errors: an unknown handle, NULL arguments, a bad code. */
	char* none = danyue_invite(99);
	printf("unknown handle: %s %s\n", none == NULL ? "NULL" : "?", take(danyue_last_error()));
	rc = danyue_pair_cancel(laptop, NULL);
	printf("null id: %d %s\n", rc, take(danyue_last_error()));
	char nonsense[] = "nonsense";
	struct join bad = {.node = phone, .code = nonsense};
	join_thread(&bad);
	printf("bad code: %s\n", bad.library ? "joined" : bad.error_code);

	printf("stop: %d %d %d\n", danyue_stop(laptop), danyue_stop(phone), danyue_stop(tablet));
	pthread_mutex_lock(&log_mu);
	printf("logged: %s\n", log_lines > 0 ? "yes" : "no");
	pthread_mutex_unlock(&log_mu);
	return 0;
}
