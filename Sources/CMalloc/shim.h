#ifndef SNAPSYNC_CMALLOC_SHIM_H
#define SNAPSYNC_CMALLOC_SHIM_H
// glibc's <malloc.h>, which Swift's Glibc module does not include, for mallopt() only:
// snapsyncd pins M_MMAP_THRESHOLD at startup (Sources/snapsyncd/main.swift says why).
// No library to link: mallopt is libc's.
#include <sys/types.h>
#include <malloc.h>
#endif
