// Loads libibverbs.so.1 with dlopen, as Open MPI's openib component and
// other plugin hosts do, uses a device (which starts the library's
// threads), closes everything, dlcloses the library and lives on for a
// while. Prints whether the library is still loaded: it must be, as its
// threads run on (a library unloaded under them would crash the process).
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <unistd.h>

#define LOAD(name) __typeof__(&name) p_##name = (__typeof__(&name))dlsym(lib, #name)

int main(void) {
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fprintf(stderr, "dlopen: %s\n", dlerror()), 1;
  LOAD(ibv_get_device_list);
  LOAD(ibv_free_device_list);
  LOAD(ibv_open_device);
  LOAD(ibv_close_device);
  LOAD(ibv_alloc_pd);
  LOAD(ibv_dealloc_pd);
  LOAD(ibv_create_cq);
  LOAD(ibv_destroy_cq);
  LOAD(ibv_create_qp);
  LOAD(ibv_destroy_qp);
  if (!p_ibv_get_device_list || !p_ibv_create_qp) return fprintf(stderr, "dlsym failed\n"), 1;
  int n = 0;
  struct ibv_device** list = p_ibv_get_device_list(&n);
  struct ibv_context* ctx = list && n ? p_ibv_open_device(list[0]) : NULL;
  if (!ctx) return perror("ibv_open_device"), 1;
  struct ibv_pd* pd = p_ibv_alloc_pd(ctx);
  struct ibv_cq* cq = pd ? p_ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
  struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                               .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp* qp = cq ? p_ibv_create_qp(pd, &a) : NULL;
  if (!qp) return perror("pd/cq/qp"), 1;
  p_ibv_destroy_qp(qp);
  p_ibv_destroy_cq(cq);
  p_ibv_dealloc_pd(pd);
  p_ibv_close_device(ctx);
  p_ibv_free_device_list(list);
  if (dlclose(lib) != 0) return fprintf(stderr, "dlclose: %s\n", dlerror()), 1;
  void* again = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  printf("after dlclose: %s\n", again ? "still loaded" : "unloaded");
  usleep(300 * 1000);  // the library's threads get their turn
  printf("alive\n");
  return again ? 0 : 1;
}
