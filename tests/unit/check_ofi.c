/* check_ofi.c - placeholder */
#include <stdio.h>
int main(void) { return 77; }
