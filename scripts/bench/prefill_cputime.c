/* prefill_cputime.c (scripts/bench/) - the harness behind docs/results.md's Gemma 3 prefill CPU-time figures: a
 * model's prefill (256-row chunks) and decode steps with 1 thread, timed by the thread's CPU
 * clock, so that other processes on a shared machine do not count (bench-model's wall clock
 * was 5-10x the work during these runs). Not part of the build; compile against a build tree:
 *   gcc -O2 -I. -o pf scripts/bench/prefill_cputime.c build/libsdnpu.a \
 *       -lopenblas -lm -lpthread $(pkg-config --libs sqlite3 libxxhash libpcre2-8 libcjson libcrypto)
 *   SDN_KERNEL=avx512 ./pf MODEL.gguf PROMPT_TOKENS REPS auto,kernels,sgemm [DECODE_STEPS]
 * Prints prefill tokens per CPU-second (median and best of REPS after one warm-up) and the
 * median CPU time of a decode step. Tokens are random ids below 200000. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/sdn_util.h"
#include "engine/forward.h"
#include "kernels/kernel_path.h"
#include "modelfile/model.h"
static double cpu(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  const char*path=argv[1]; int P=atoi(argv[2]); int reps=atoi(argv[3]); const char*modes=argv[4]; int gen=argc>5?atoi(argv[5]):8;
  sdn_err err={0}; sdn_model*m; sdn_model_load_opts lo={0};
  if(sdn_model_load(path,&lo,&m,&err)){fprintf(stderr,"%s\n",err.msg);return 1;}
  sdn_ctx*c; sdn_ctx_params cp={.n_ctx=P+gen+8,.n_threads=1,.max_batch=P<256?P:256};
  if(sdn_ctx_new(m,&cp,&c,&err)){fprintf(stderr,"%s\n",err.msg);return 1;}
  int32_t*toks=malloc(sizeof(int32_t)*(P+gen+1)); srand(7); for(int i=0;i<P+gen+1;i++)toks[i]=rand()%200000;
  float*lg=malloc(sizeof(float)*300000);
  char mb[64]; snprintf(mb,sizeof mb,"%s",modes); char*sv;
  for(char*md=strtok_r(mb,",",&sv);md;md=strtok_r(NULL,",",&sv)){
    sdn_prefill_mm_set(!strcmp(md,"sgemm")?SDN_PREFILL_MM_SGEMM:!strcmp(md,"kernels")?SDN_PREFILL_MM_KERNELS:SDN_PREFILL_MM_AUTO);
    double pt[32],dt[256]; int nd=0;
    for(int r=0;r<reps+1;r++){
      sdn_kv_truncate(c,0);
      double t0=cpu();
      for(int i=0;i<P;i+=256){int n=P-i<256?P-i:256; sdn_batch b={.n=n,.tokens=toks+i,.n_logits=0};
        if(sdn_forward(c,&b,NULL,&err)){fprintf(stderr,"%s\n",err.msg);return 1;}}
      double t=cpu()-t0;
      for(int g=0;g<gen;g++){int32_t row=0; sdn_batch d={.n=1,.tokens=&toks[P+g],.logit_rows=&row,.n_logits=1,.invariant=1};
        double t1=cpu(); if(sdn_forward(c,&d,lg,&err)){fprintf(stderr,"%s\n",err.msg);return 1;} if(r)dt[nd++]=cpu()-t1;}
      if(r)pt[r-1]=t;
    }
    qsort(pt,reps,sizeof(double),cmpd); qsort(dt,nd,sizeof(double),cmpd);
    printf("%s path=%s mode=%-7s P=%d: prefill %.1f tok/cpu-s (median; best %.1f)  decode step %.2f ms cpu (median)\n",
      path, sdn_kpath_name(sdn_kpath_get()), md, P, P/pt[reps/2], P/pt[0], nd ? dt[nd/2]*1e3 : 0.0);
    fflush(stdout);
  }
  return 0;
}
