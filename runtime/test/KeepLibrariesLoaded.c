/* Preloaded into the sanitized multi-rank tests (scripts/sanitize.sh):
   dlclose keeps the library loaded. Open MPI unloads its components at
   MPI_Finalize, and LeakSanitizer, which reports at exit, cannot name the
   frames of an unloaded library, so the suppressions of its own leaks
   (lsan.supp) would not apply. Nothing else changes: MPI cannot start
   again in a process that finalised it. */
int dlclose(void *handle) {
  (void)handle;
  return 0;
}
