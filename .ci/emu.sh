# shellcheck shell=bash
# What .ci/wine and .ci/android share, sourced by both: installing what is
# missing, building every package's test binary for another OS, and running
# the binaries one package at a time under an emulator, with a time limit per
# package, a log per package and a line per package:
#
#   wine: windows/amd64 ok   ./crdt        P passed, F failed, S skipped in Ts
#
# The script that sources it sets emu_name (wine, qemu), emu_target
# (GOOS/GOARCH), emu_exe (.exe or nothing) and defines emu_run BINARY LOG
# ARGS... (runs one test binary under the emulator, in the package's
# directory) and emu_limit PACKAGE (prints the package's time limit and its
# extra test flags).
#
# The emulated tests run without CI in their environment: what CI must have
# to run a test (a browser, a C compiler) is there for the native run, and
# a test of another OS that lacks it skips, saying so.

emu_cache=${XDG_CACHE_HOME:-$HOME/.cache}/danyue-ci
emu_artifacts=${DANYUE_ARTIFACTS:-${TMPDIR:-/tmp}/danyue-ci-artifacts}

# emu_install CHECK:PACKAGE...: installs the Debian packages whose CHECK (a
# command on PATH or an absolute path) is missing; without root or apt-get it
# names them and fails.
emu_install() {
	local want=() pair check pkg
	for pair in "$@"; do
		check=${pair%%:*}
		pkg=${pair#*:}
		if [[ $check == /* ]]; then
			[ -e "$check" ] && continue
		else
			command -v "$check" >/dev/null 2>&1 && continue
		fi
		want+=("$pkg")
	done
	[ ${#want[@]} -eq 0 ] && return 0
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "$emu_name: missing ${want[*]}; install them (apt-get install ${want[*]})" >&2
		return 1
	fi
	echo "$emu_name: installing ${want[*]}"
	local start=$SECONDS
	# .ci/wine and .ci/android run side by side: one apt at a time.
	mkdir -p "$emu_cache"
	(
		flock 8
		apt-get update -qq &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
	) 8>"$emu_cache/apt.lock" || return 1
	echo "$emu_name: installed in $((SECONDS - start))s"
}

# emu_packages [all|PACKAGE...]: prints "IMPORTPATH DIR" for each package to
# test, as built for GOOS and GOARCH (set by the caller). No argument: the gated packages ($emu_gate), the ones that pass on
# this target and whose failure fails CI; "all": every package with tests.
emu_packages() {
	local sel=("$@")
	if [ ${#sel[@]} -eq 0 ]; then
		# shellcheck disable=SC2206 # the gate is a list of package patterns
		sel=($emu_gate)
	elif [ "${sel[0]}" = all ]; then
		sel=(./...)
	fi
	go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "${sel[@]}" | grep .
}

# emu_build DIR LDFLAGS [go test flags...] < "IMPORTPATH DIR" lines: compiles
# and links the test binaries, DIR/N/NAME.test$emu_exe, and prints
# "IMPORTPATH PKGDIR BINARY" for each. "go test -c -o DIR/" names a binary
# after the last element of its package, so packages that share it go to
# separate runs (N); each run compiles and links in parallel. A package whose
# tests do not build has no binary, and emu_test reports it.
emu_build() {
	local out=$1 ldflags=$2 pkg dir base i
	shift 2
	local -a groups=() lines=()
	local -A taken=()
	while read -r pkg dir; do
		base=${pkg##*/}
		i=0
		while [ -n "${taken[$i/$base]:-}" ]; do
			i=$((i + 1))
		done
		taken[$i/$base]=1
		groups[i]="${groups[i]:-} $pkg"
		lines+=("$pkg $dir $out/$i/$base.test$emu_exe")
	done
	for i in "${!groups[@]}"; do
		mkdir -p "$out/$i"
		# shellcheck disable=SC2086 # the group is a list of packages
		go test -c -ldflags="$ldflags" "$@" -o "$out/$i/" ${groups[i]} >&2 || true
	done
	printf '%s\n' "${lines[@]}"
}

# emu_test LOGDIR < "IMPORTPATH PKGDIR BINARY" lines: runs each binary under
# the emulator in its package's directory (where its testdata is) with
# -test.v, its time limit (-test.timeout, and a kill a minute later in case
# the emulator itself hangs) and flags, writes its output to LOGDIR and says
# how it went. It returns 1 if any package failed.
emu_test() {
	local logs=$1 pkg dir bin limit flags log rc built start status pass fail skip
	local total_pass=0 total_fail=0 total_skip=0 failed=0
	mkdir -p "$logs"
	while read -r pkg dir bin; do
		read -r limit flags <<<"$(emu_limit "$pkg")"
		log=$logs/$(echo "${pkg#github.com/danyue/danyue/}" | tr / _).log
		start=$SECONDS
		built=1
		if [ ! -x "$bin" ]; then
			echo "tests of $pkg did not build for $emu_target" >"$log"
			built=0 rc=1
		else
			# shellcheck disable=SC2086 # flags are a list
			# RAPID_NOFAILFILE: the property tests write no fail files
			# into the package's testdata.
			(cd "$dir" && export RAPID_NOFAILFILE=1 &&
				emu_run "$bin" "$log" "$limit" -test.v -test.timeout="$limit" $flags) </dev/null
			rc=$?
		fi
		pass=$(grep -c '^--- PASS' "$log")
		fail=$(grep -c '^--- FAIL' "$log")
		skip=$(grep -c '^--- SKIP' "$log")
		# (A test binary that panics exits 2, as go test does.)
		case $built$rc in
		0*) status="FAIL (did not build)" ;;
		10) status=ok ;;
		1124 | 1137) status="FAIL (killed after $limit)" ;;
		*) status=FAIL ;;
		esac
		if grep -q '^panic: test timed out' "$log"; then
			status="FAIL (timed out after $limit)"
		fi
		if [ "$rc" != 0 ]; then
			failed=1
			fail=$((fail > 0 ? fail : 1))
		fi
		total_pass=$((total_pass + pass))
		total_fail=$((total_fail + fail))
		total_skip=$((total_skip + skip))
		printf '%s: %s %-4s %-28s %4d passed, %d failed, %d skipped in %ds\n' \
			"$emu_name" "$emu_target" "${status%% *}" "${pkg#github.com/danyue/danyue/}" \
			"$pass" "$fail" "$skip" $((SECONDS - start))
		# Each skipped test with its reason (the last line it logged, not
		# the daemons' slog records a cleanup passes through after it).
		awk '/^=== (RUN|CONT|NAME)/ { test = $3 }
			/^    [^ ].*\.go:[0-9]+: / && !/level=/ { why[test] = $0 }
			/^--- SKIP/ { w = why[$3]; sub(/^ +[^ ]+\.go:[0-9]+: /, "", w); print "    skipped " $3 ": " w }' "$log"
		if [ "$rc" != 0 ]; then
			echo "    $status; the failures (whole log: $log):"
			# Each failed test with the last lines it logged (not the
			# slog records it passed through), then how the binary ended.
			awk '/^=== (RUN|CONT|NAME)/ { test = $3 }
				/^ +[^ ].*\.go:[0-9]+: / && !/level=/ { n[test]++; said[test, n[test] % 5] = $0 }
				/^ *--- FAIL/ {
					print "    " $0
					for (i = n[$3] - 4; i <= n[$3]; i++) if (i > 0) print "    " said[$3, i % 5]
					n[$3] = 0
				}
				/^(panic|fatal error):/ { print "    " $0 " (in " test ")" }' "$log" | head -n 60
			[ "$rc" != 0 ] && ! grep -q -e '^ *--- FAIL' -e '^panic:' "$log" && tail -n 5 "$log" | sed 's/^/    /'
		fi
	done
	echo "$emu_name: $total_pass passed, $total_fail failed, $total_skip skipped"
	return $failed
}

# emu_crossos LOGDIR COMMAND...: the cross-OS sync scenario
# (testnet/crossos): COMMAND, the other OS's danyue under its emulator,
# joins a Linux daemon's library on loopback, both write, it is killed and
# restarted, and nothing it acknowledged is lost. The test runs natively;
# it prints how long pairing and each convergence took. It returns 1 if the
# scenario failed.
emu_crossos() {
	local logs=$1 start rc
	shift
	local log=$logs/crossos.log
	mkdir -p "$logs"
	start=$SECONDS
	DANYUE_CROSSOS_CMD="$*" go test -count=1 -v -run '^TestCrossOS$' -timeout 15m ./testnet/crossos/ >"$log" 2>&1
	rc=$?
	printf '%s: %s %-4s %-28s in %ds\n' "$emu_name" "$emu_target" "$([ $rc = 0 ] && echo ok || echo FAIL)" \
		"cross-OS sync with linux" $((SECONDS - start))
	grep -E -e '^    crossos_test\.go:[0-9]+: (paired|converged|after)' -e '^--- (FAIL|SKIP)' "$log" | sed 's/^ */    /'
	[ $rc != 0 ] && grep -E '^    crossos_test\.go:[0-9]+: ' "$log" | grep -v level= | tail -n 5
	return $rc
}
