/*
 * A stand-in for Windows' bcryptprimitives.dll, for running Go programs under
 * wine releases that lack it (wine 8 and older). It is built by .ci/wine and
 * copied into the wine prefix's system32; it is never shipped with danyue.
 *
 * Go 1.24 and later load ProcessPrng from bcryptprimitives.dll at start-up and
 * refuse to run without it. ProcessPrng here does no cryptography of its own:
 * it forwards to advapi32's SystemFunction036 (RtlGenRandom), which wine
 * implements by reading the host's random device. Windows' ProcessPrng takes
 * a SIZE_T length and never fails; RtlGenRandom takes a ULONG, so the buffer
 * is filled in chunks, and a failure returns FALSE so that the caller (Go's
 * runtime and crypto/rand check the result) does not use an unfilled buffer.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
	const SIZE_T chunk = 1u << 30;

	while (length > 0) {
		ULONG n = (ULONG)(length < chunk ? length : chunk);

		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		length -= n;
	}
	return TRUE;
}

/* No C runtime is linked in (-nostdlib): this is the DLL's entry point. */
BOOL WINAPI DllMainCRTStartup(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
	(void)instance;
	(void)reason;
	(void)reserved;
	return TRUE;
}
