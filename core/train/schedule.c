/* train/schedule.c — see schedule.h. Sources (ostris/ai-toolkit, MIT, read at
 * 27a03a91): toolkit/samplers/custom_flowmatch_sampler.py (set_train_timesteps,
 * calculate_shift, get_weights_for_timesteps), diffusers'
 * FlowMatchEulerDiscreteScheduler.__init__ (sigma_min of the init table),
 * jobs/process/BaseSDTrainProcess.py (the index per item), toolkit/scheduler.py
 * (lr). Owns the timestep tables and draws and the lr schedules.
 *
 * The 'weighted' loss weights below are ai-toolkit's
 * toolkit/timestep_weighing/default_weighing_scheme.py (measured on
 * flex.1-alpha), reproduced as float32 under its MIT license:
 *   Copyright (c) 2024 Ostris, LLC. Permission is hereby granted, free of
 *   charge, to any person obtaining a copy of this software and associated
 *   documentation files (the "Software"), to deal in the Software without
 *   restriction, including without limitation the rights to use, copy, modify,
 *   merge, publish, distribute, sublicense, and/or sell copies of the
 *   Software, and to permit persons to whom the Software is furnished to do
 *   so, subject to the following conditions: The above copyright notice and
 *   this permission notice shall be included in all copies or substantial
 *   portions of the Software. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT
 *   WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
 * (docs/DECISIONS.md, "Training job": why the table and not a formula.) */
#include "train/schedule.h"

#include "util/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ORK_PI 3.14159265358979323846 /* M_PI is POSIX, not C11 */

enum { TS_N = 1000, NEXT_SAMPLE_N = 8 /* ai-toolkit's next_sample_timesteps default */ };

static const float weighing_scheme[TS_N] = {
    0.905706525f, 0.909787416f, 0.925100982f, 0.939913392f, 0.949735582f, 0.962195873f, 0.969163895f, 0.992735863f,
    1.01659095f, 1.03926849f, 1.04290676f, 1.06779194f, 1.09289658f, 1.11492515f, 1.10158515f, 1.12091208f,
    1.1399473f, 1.15592194f, 1.14375556f, 1.16057873f, 1.17614686f, 1.18958998f, 1.18673718f, 1.19938242f,
    1.21135139f, 1.22012162f, 1.22179461f, 1.23292518f, 1.24263954f, 1.25111854f, 1.25624597f, 1.26688838f,
    1.27601469f, 1.2822541f, 1.28924394f, 1.29727769f, 1.30421829f, 1.31041431f, 1.31908762f, 1.32532656f,
    1.32954848f, 1.33246493f, 1.34361064f, 1.34827363f, 1.35118353f, 1.35560608f, 1.35993361f, 1.36254025f,
    1.36413908f, 1.37237537f, 1.37483656f, 1.37766814f, 1.38028073f, 1.38484085f, 1.387743f, 1.39096916f,
    1.39277565f, 1.40319204f, 1.40643907f, 1.40972328f, 1.41322851f, 1.42080534f, 1.42545044f, 1.42940128f,
    1.43230712f, 1.44380522f, 1.44651103f, 1.44908834f, 1.45144653f, 1.45896077f, 1.46011138f, 1.46034265f,
    1.45954347f, 1.46948397f, 1.4705261f, 1.47053182f, 1.46979618f, 1.47726548f, 1.47713375f, 1.47689652f,
    1.47600329f, 1.48714197f, 1.4877342f, 1.48840809f, 1.48935783f, 1.48845816f, 1.48823047f, 1.48787451f,
    1.49498463f, 1.49579155f, 1.49510813f, 1.49507797f, 1.49956632f, 1.4994632f, 1.49868822f, 1.49765682f,
    1.50385189f, 1.50374305f, 1.50298226f, 1.50256693f, 1.50680029f, 1.50657558f, 1.5067178f, 1.50501049f,
    1.50843799f, 1.50731611f, 1.50622344f, 1.50475121f, 1.51248538f, 1.51215959f, 1.5116061f, 1.51028645f,
    1.51564085f, 1.51579249f, 1.51428258f, 1.51412332f, 1.51916277f, 1.51899862f, 1.51775742f, 1.51671326f,
    1.51865375f, 1.51796353f, 1.51598859f, 1.51504469f, 1.52265751f, 1.52152324f, 1.52011037f, 1.52254808f,
    1.52153683f, 1.52020979f, 1.51843548f, 1.52209759f, 1.52097082f, 1.51966763f, 1.51773322f, 1.52031577f,
    1.51927173f, 1.51758301f, 1.51618528f, 1.51774132f, 1.51630998f, 1.51503575f, 1.51305568f, 1.51541078f,
    1.5139935f, 1.51263583f, 1.51087594f, 1.51257014f, 1.51059067f, 1.50863922f, 1.50685012f, 1.50944209f,
    1.50802779f, 1.50602937f, 1.50402308f, 1.50489211f, 1.50316548f, 1.50132143f, 1.49917018f, 1.50042033f,
    1.49799156f, 1.49596596f, 1.49412763f, 1.49614155f, 1.49459732f, 1.49265778f, 1.4904958f, 1.49134457f,
    1.48988914f, 1.48804307f, 1.487378f, 1.48514402f, 1.48306096f, 1.48123038f, 1.48313415f, 1.48085046f,
    1.4793644f, 1.47737074f, 1.47740495f, 1.47529626f, 1.47332811f, 1.47122359f, 1.4702605f, 1.46847808f,
    1.46573234f, 1.46392596f, 1.46442914f, 1.46214235f, 1.46048701f, 1.45859313f, 1.45865083f, 1.45687175f,
    1.45481348f, 1.4528228f, 1.4519707f, 1.45018268f, 1.44808352f, 1.44631612f, 1.44546044f, 1.44324636f,
    1.44125676f, 1.43901384f, 1.43886995f, 1.43700588f, 1.43480086f, 1.43273616f, 1.43208611f, 1.43046832f,
    1.42870593f, 1.4264065f, 1.42492914f, 1.42264926f, 1.42053986f, 1.42071927f, 1.41879308f, 1.41705155f,
    1.41509771f, 1.41421914f, 1.412431f, 1.41044426f, 1.40823185f, 1.40768969f, 1.40578389f, 1.4034853f,
    1.40161395f, 1.40039003f, 1.39834666f, 1.39629126f, 1.39409089f, 1.39332044f, 1.39101887f, 1.38880897f,
    1.38651824f, 1.38533258f, 1.38323927f, 1.38127768f, 1.3789171f, 1.37976015f, 1.37771308f, 1.37569082f,
    1.37358475f, 1.37113392f, 1.36907256f, 1.36684966f, 1.36467683f, 1.3646909f, 1.36254168f, 1.36089909f,
    1.35872567f, 1.35667312f, 1.35493159f, 1.35223615f, 1.35276949f, 1.35069788f, 1.34867489f, 1.34648538f,
    1.34488022f, 1.34298635f, 1.34107411f, 1.33921945f, 1.33748662f, 1.33566332f, 1.33369935f, 1.33168304f,
    1.32937002f, 1.32760274f, 1.32560611f, 1.32363677f, 1.32248747f, 1.32019353f, 1.31858659f, 1.31635702f,
    1.31534851f, 1.31350696f, 1.31155813f, 1.30935192f, 1.30809402f, 1.30608439f, 1.30419183f, 1.30221725f,
    1.3005265f, 1.29849064f, 1.29643393f, 1.29461884f, 1.2924813f, 1.29062927f, 1.2886095f, 1.28643775f,
    1.28528082f, 1.28310108f, 1.28102207f, 1.27891612f, 1.27856696f, 1.27660608f, 1.27458549f, 1.27284002f,
    1.27098322f, 1.26913095f, 1.26713181f, 1.26544213f, 1.26355016f, 1.26149464f, 1.25939083f, 1.25788045f,
    1.25603139f, 1.25408244f, 1.25228047f, 1.25050962f, 1.2482692f, 1.24620914f, 1.2445823f, 1.24322367f,
    1.24146509f, 1.23965037f, 1.23766994f, 1.23573804f, 1.23392403f, 1.23205662f, 1.22998929f, 1.22868407f,
    1.22692502f, 1.22500706f, 1.22312677f, 1.22151661f, 1.21969962f, 1.21781957f, 1.21582794f, 1.21408033f,
    1.21212614f, 1.21010077f, 1.20835078f, 1.20635259f, 1.20460129f, 1.20271492f, 1.20115411f, 1.19922543f,
    1.19718349f, 1.19515491f, 1.19357097f, 1.19176424f, 1.18989301f, 1.18789673f, 1.18653512f, 1.18460059f,
    1.18268943f, 1.18097281f, 1.17893314f, 1.17746842f, 1.17564583f, 1.17363083f, 1.17199111f, 1.17011273f,
    1.16814685f, 1.16592193f, 1.16463041f, 1.16274512f, 1.16085672f, 1.15909386f, 1.15753353f, 1.15559018f,
    1.1538552f, 1.15186572f, 1.14994216f, 1.1481154f, 1.14644456f, 1.14441204f, 1.14281225f, 1.14103138f,
    1.13918364f, 1.13733041f, 1.13543463f, 1.13367915f, 1.13197815f, 1.13008749f, 1.12835932f, 1.12648094f,
    1.12486112f, 1.12276268f, 1.12091625f, 1.11907101f, 1.11720443f, 1.11589849f, 1.11404598f, 1.11240125f,
    1.11068249f, 1.10872197f, 1.1068269f, 1.10505843f, 1.10340214f, 1.10110319f, 1.09968531f, 1.09781313f,
    1.09631276f, 1.09449041f, 1.09274948f, 1.09109449f, 1.08927369f, 1.08783317f, 1.08609581f, 1.08421695f,
    1.0826304f, 1.08066869f, 1.07896173f, 1.07736766f, 1.07557869f, 1.07393456f, 1.07218611f, 1.07043767f,
    1.06891811f, 1.06718326f, 1.06544733f, 1.06377542f, 1.06209815f, 1.0604465f, 1.05870771f, 1.05708659f,
    1.05531073f, 1.05368888f, 1.05203807f, 1.05020201f, 1.04874134f, 1.04696202f, 1.04536271f, 1.04390502f,
    1.04188681f, 1.04055142f, 1.0387938f, 1.03704512f, 1.03570688f, 1.03403902f, 1.03256691f, 1.03087127f,
    1.02910089f, 1.02757609f, 1.02587092f, 1.02415347f, 1.02280724f, 1.02111185f, 1.01948905f, 1.0178107f,
    1.01598322f, 1.01438248f, 1.01288402f, 1.01119852f, 1.00987422f, 1.00818741f, 1.0064919f, 1.0050267f,
    1.00368214f, 1.00189912f, 1.00041723f, 0.998856664f, 0.99698174f, 0.995471418f, 0.993924201f, 0.992397964f,
    0.991077423f, 0.989401579f, 0.988089561f, 0.98612529f, 0.984638989f, 0.983111203f, 0.981507659f, 0.97993052f,
    0.978495002f, 0.976923943f, 0.97547555f, 0.973727763f, 0.972278118f, 0.970771253f, 0.969374239f, 0.967756927f,
    0.966380656f, 0.9648121f, 0.963326097f, 0.961987436f, 0.960519791f, 0.959002912f, 0.957561851f, 0.955863476f,
    0.954286695f, 0.95300591f, 0.951376498f, 0.949967444f, 0.948621392f, 0.947046161f, 0.94550252f, 0.944198847f,
    0.94274646f, 0.941338718f, 0.939782143f, 0.938550889f, 0.937250853f, 0.93567735f, 0.934095442f, 0.932537913f,
    0.931135714f, 0.929655015f, 0.928371608f, 0.926839888f, 0.925403714f, 0.923925936f, 0.922585607f, 0.921108603f,
    0.919789314f, 0.918501258f, 0.916977882f, 0.915430188f, 0.9140625f, 0.912775636f, 0.911384284f, 0.910196543f,
    0.908822417f, 0.907437563f, 0.90614301f, 0.904649913f, 0.903354704f, 0.901871264f, 0.900699079f, 0.899358988f,
    0.898029149f, 0.896583319f, 0.895361781f, 0.894024968f, 0.892823458f, 0.891473591f, 0.890047073f, 0.888577342f,
    0.887448251f, 0.886075318f, 0.884875178f, 0.883570433f, 0.882242799f, 0.880834341f, 0.879486024f, 0.878227234f,
    0.876940131f, 0.875569701f, 0.87435931f, 0.873109698f, 0.871776402f, 0.870373547f, 0.869137704f, 0.867996395f,
    0.866546512f, 0.865377128f, 0.864319205f, 0.86301291f, 0.861802101f, 0.860661089f, 0.859619319f, 0.858497798f,
    0.857111156f, 0.855811834f, 0.854767382f, 0.853585839f, 0.852556288f, 0.851208508f, 0.85005486f, 0.848985434f,
    0.847638011f, 0.846508443f, 0.845426381f, 0.84409827f, 0.842953682f, 0.841949344f, 0.840617776f, 0.839500546f,
    0.838439941f, 0.837239087f, 0.836262584f, 0.835175991f, 0.834083319f, 0.833010018f, 0.831830561f, 0.830736041f,
    0.829679608f, 0.82872057f, 0.827567875f, 0.826481104f, 0.82535708f, 0.824355125f, 0.82325393f, 0.822137177f,
    0.821280003f, 0.81997031f, 0.819060802f, 0.81799531f, 0.816786706f, 0.815815032f, 0.81491822f, 0.81407547f,
    0.813143313f, 0.811859906f, 0.810970843f, 0.809902489f, 0.809000432f, 0.807977676f, 0.807029665f, 0.805868447f,
    0.804905534f, 0.803994834f, 0.803061306f, 0.802138269f, 0.801291347f, 0.800209165f, 0.79922682f, 0.798146725f,
    0.797321498f, 0.796401799f, 0.795454144f, 0.794579208f, 0.793812215f, 0.792600393f, 0.791780055f, 0.79085964f,
    0.789930463f, 0.789014935f, 0.788219273f, 0.787005842f, 0.786373198f, 0.785202742f, 0.784448802f, 0.783501387f,
    0.78270036f, 0.781980336f, 0.780820191f, 0.780068815f, 0.779129326f, 0.778465867f, 0.777573228f, 0.776863396f,
    0.776034236f, 0.775243878f, 0.774303079f, 0.773592651f, 0.772474885f, 0.771816373f, 0.770974874f, 0.770251036f,
    0.769390047f, 0.768716931f, 0.767892241f, 0.767212808f, 0.766358972f, 0.765703738f, 0.764777124f, 0.764020324f,
    0.763346672f, 0.762562394f, 0.761750996f, 0.761089623f, 0.760379434f, 0.759649277f, 0.758895397f, 0.758191645f,
    0.757399917f, 0.756827474f, 0.75607723f, 0.755476594f, 0.754653931f, 0.753967404f, 0.753139853f, 0.752554357f,
    0.751916051f, 0.751315415f, 0.750514269f, 0.749712586f, 0.749231756f, 0.748420715f, 0.747915566f, 0.747361779f,
    0.746843636f, 0.746231854f, 0.745643079f, 0.744781077f, 0.744220614f, 0.743595481f, 0.743148983f, 0.742227137f,
    0.741811454f, 0.741289258f, 0.740713358f, 0.740154624f, 0.739602149f, 0.739059985f, 0.738443136f, 0.737790465f,
    0.737305224f, 0.736828864f, 0.736374736f, 0.735848308f, 0.735438168f, 0.7348212f, 0.734376371f, 0.733655334f,
    0.73322314f, 0.7326262f, 0.732192993f, 0.731575251f, 0.731225669f, 0.730614901f, 0.73024267f, 0.729946733f,
    0.729456306f, 0.728706419f, 0.728335321f, 0.727990031f, 0.727623165f, 0.727321744f, 0.726900101f, 0.726513088f,
    0.726100087f, 0.725773335f, 0.725188673f, 0.724976659f, 0.724211991f, 0.723846555f, 0.723642766f, 0.723223627f,
    0.722787797f, 0.722614408f, 0.722126245f, 0.721821606f, 0.7215451f, 0.721386909f, 0.720920682f, 0.720725775f,
    0.720399499f, 0.720044851f, 0.719767928f, 0.719518602f, 0.719022691f, 0.718883693f, 0.718611777f, 0.718510568f,
    0.718199611f, 0.718015254f, 0.717553616f, 0.717334151f, 0.717120588f, 0.716883719f, 0.716365457f, 0.71627748f,
    0.716165125f, 0.71606636f, 0.715917587f, 0.715744019f, 0.715402603f, 0.715343654f, 0.715220034f, 0.715047598f,
    0.715006232f, 0.714905262f, 0.71478045f, 0.714718044f, 0.714644253f, 0.714323044f, 0.714289427f, 0.714325249f,
    0.714136124f, 0.714075148f, 0.713877141f, 0.713875055f, 0.713845015f, 0.713874817f, 0.713760734f, 0.71373409f,
    0.713705599f, 0.713679254f, 0.713567734f, 0.713421464f, 0.713577807f, 0.713640213f, 0.713737965f, 0.713613153f,
    0.713595808f, 0.71336776f, 0.713686943f, 0.713760197f, 0.713768244f, 0.713707983f, 0.713819563f, 0.713512123f,
    0.713662982f, 0.713727176f, 0.713859379f, 0.714098334f, 0.714293361f, 0.714284837f, 0.714445651f, 0.714730978f,
    0.714726865f, 0.714992523f, 0.715143442f, 0.715170443f, 0.715283751f, 0.715286613f, 0.715552151f, 0.715828657f,
    0.716106772f, 0.716176093f, 0.716302752f, 0.716527641f, 0.716739297f, 0.716881156f, 0.717145979f, 0.717418134f,
    0.717615426f, 0.717750907f, 0.718098819f, 0.718157172f, 0.718493521f, 0.718587458f, 0.718870938f, 0.71910578f,
    0.719263196f, 0.719526529f, 0.719708562f, 0.720137358f, 0.720301509f, 0.720422864f, 0.720592737f, 0.720960379f,
    0.721215606f, 0.721491158f, 0.721719503f, 0.722181857f, 0.722528577f, 0.722724259f, 0.722976983f, 0.723223269f,
    0.723518193f, 0.723869085f, 0.724099398f, 0.724461317f, 0.724598467f, 0.725001633f, 0.725106716f, 0.725573421f,
    0.725816846f, 0.726023138f, 0.726200879f, 0.726682663f, 0.726635695f, 0.72722137f, 0.727465272f, 0.72797364f,
    0.728108466f, 0.728304982f, 0.728539705f, 0.728969693f, 0.729371369f, 0.729696512f, 0.729803085f, 0.730055153f,
    0.730376244f, 0.730628848f, 0.730763614f, 0.731227279f, 0.731429517f, 0.731632471f, 0.731428266f, 0.731633127f,
    0.731927335f, 0.732114315f, 0.732216477f, 0.732289493f, 0.732541323f, 0.732536972f, 0.73254019f, 0.732356191f,
    0.732250392f, 0.732225001f, 0.732014656f, 0.732147455f, 0.732187033f, 0.732079625f, 0.731517136f, 0.731324375f,
    0.73107928f, 0.73080802f, 0.730630457f, 0.729629517f, 0.728974581f, 0.728864908f, 0.72817868f, 0.727744877f,
    0.727232218f, 0.726594985f, 0.725848377f, 0.725248814f, 0.72454226f, 0.723800004f, 0.722861946f, 0.721872807f,
    0.720892072f, 0.719814479f, 0.718635261f, 0.717454731f, 0.71621716f, 0.714924634f, 0.713665545f, 0.712162793f,
    0.71083653f, 0.709209025f, 0.707624555f, 0.706023693f, 0.704273522f, 0.702367067f, 0.700793743f, 0.698858917f,
    0.696875811f, 0.694838822f, 0.692679942f, 0.690736055f, 0.688457012f, 0.68642658f, 0.683781326f, 0.681628644f,
    0.679063499f, 0.676746726f, 0.674271643f, 0.671568871f, 0.6689924f, 0.666294038f, 0.663417697f, 0.660390496f,
    0.65748626f, 0.654436946f, 0.651530385f, 0.648556828f, 0.645398319f, 0.642306805f, 0.639232814f, 0.636004031f,
    0.632597625f, 0.629109383f, 0.625614762f, 0.622304142f, 0.618873f, 0.615329921f, 0.611803651f, 0.608195126f,
    0.604539156f, 0.600940406f, 0.597244024f, 0.593711615f, 0.589705169f, 0.58596772f, 0.582157195f, 0.57838136f,
    0.574799895f, 0.570989668f, 0.567195356f, 0.563358307f, 0.559420407f, 0.555538237f, 0.551928043f, 0.548293471f,
    0.544551432f, 0.541051567f, 0.537491083f, 0.534004152f, 0.530414402f, 0.526958466f, 0.523530662f, 0.520039976f,
    0.51667428f, 0.513296902f, 0.509819388f, 0.506457865f, 0.503051758f, 0.499729753f, 0.496714503f, 0.493357658f,
    0.490218699f, 0.486634225f, 0.483116597f, 0.479215801f, 0.475513697f, 0.472070903f, 0.46892485f, 0.466099381f,
    0.463553429f, 0.460589826f, 0.457633048f, 0.455356091f, 0.454053134f, 0.452413529f, 0.452073485f, 0.450957358f,
    0.450528711f, 0.449806273f, 0.448465556f, 0.446489513f, 0.445807159f, 0.444780082f, 0.44538027f, 0.447260112f,
};

ork_status ork_ts_type_parse(const char *s, ork_ts_type *out) {
    static const struct { const char *n; ork_ts_type t; } m[] = { /* ai-toolkit's names */
        {"sigmoid", ORK_TS_SIGMOID}, {"linear", ORK_TS_LINEAR}, {"weighted", ORK_TS_WEIGHTED},
        {"shift", ORK_TS_SHIFT}, {"flux_shift", ORK_TS_RESOLUTION_SHIFT},
        {"lognorm_blend", ORK_TS_LOGNORM_BLEND}, {"one_step", ORK_TS_ONE_STEP},
        {"two_step", ORK_TS_TWO_STEP}, {"four_step", ORK_TS_FOUR_STEP}, {"eight_step", ORK_TS_EIGHT_STEP},
        {"next_sample", ORK_TS_NEXT_SAMPLE},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (!strcmp(s, m[i].n)) {
            *out = m[i].t;
            if (m[i].t == ORK_TS_NEXT_SAMPLE)
                ORK_WARN("train.timestep_type next_sample: ai-toolkit's target (the model's own step to the next "
                         "of %d timesteps) is not implemented; timesteps are drawn as next_sample draws them and "
                         "trained on the plain flow-matching target", NEXT_SAMPLE_N);
            return ORK_OK;
        }
    return ORK_E_CONFIG;
}

ork_status ork_cs_type_parse(const char *s, ork_cs_type *out) {
    if (!strcmp(s, "balanced")) *out = ORK_CS_BALANCED;
    else if (!strcmp(s, "content")) *out = ORK_CS_CONTENT;
    else if (!strcmp(s, "style")) *out = ORK_CS_STYLE;
    else return ORK_E_CONFIG;
    return ORK_OK;
}

int ork_ts_table_size(const ork_ts_params *p) { return p->type == ORK_TS_NEXT_SAMPLE ? NEXT_SAMPLE_N : TS_N; }

double ork_ts_mu(const ork_ts_params *p) {
    double m = (p->max_shift - p->base_shift) / (double)(p->max_seq - p->base_seq);
    double b = p->base_shift - m * (double)p->base_seq;
    return (double)p->image_seq_len * m + b;
}

double ork_ts_weight_at(int idx) { return idx >= 0 && idx < TS_N ? (double)weighing_scheme[idx] : 1.0; }

/* The shifted table (set_train_timesteps' shift branch): n points from
 * sigma_max = 1 down to sigma_min, the last of diffusers' init table,
 * linspace(1, 1000)/1000 reversed in float32 and, without dynamic shifting,
 * already shifted once; then shifted (again). */
static double shifted_at(const ork_ts_params *p, int idx, int n) {
    double shift = p->shift > 0 ? p->shift : 3.0;
    double smin = (double)(float)(1.0 / TS_N); /* float32 0.001 */
    if (p->fixed_shift) smin = (double)(float)(shift * smin / (1.0 + (shift - 1.0) * smin));
    double s = n > 1 ? 1.0 + (double)idx * ((smin - 1.0) / (double)(n - 1)) : 1.0; /* np.linspace */
    if (n > 1 && idx == n - 1) s = smin;
    if (p->fixed_shift) return shift * s / (1.0 + (shift - 1.0) * s);
    double e = exp(ork_ts_mu(p));
    return e / (e + (1.0 / s - 1.0)); /* time_shift(mu, 1, s) */
}

double ork_ts_sigma_at(const ork_ts_params *p, int idx) {
    int n = ork_ts_table_size(p);
    if (idx < 0 || idx >= n) return -1;
    switch (p->type) {
    case ORK_TS_SIGMOID:
    case ORK_TS_LOGNORM_BLEND: return -1; /* drawn anew for each item */
    case ORK_TS_SHIFT:
    case ORK_TS_RESOLUTION_SHIFT:
    case ORK_TS_NEXT_SAMPLE: return (double)(float)shifted_at(p, idx, n);
    default: /* linear, weighted, the *_step types: torch.linspace(1000, 1, 1000) / 1000 */
        return (double)(float)((1000.0 - 999.0 * idx / (double)(n - 1)) / 1000.0);
    }
}

int ork_ts_index(const ork_ts_params *p, ork_rng *r) {
    static const int two[] = {0, 499}, four[] = {0, 250, 500, 750},
                     eight[] = {0, 125, 250, 375, 500, 625, 750, 875};
    const int *ch = NULL;
    int k = 0;
    switch (p->type) {
    case ORK_TS_ONE_STEP: return 0;
    case ORK_TS_TWO_STEP: ch = two, k = 2; break;
    case ORK_TS_FOUR_STEP: ch = four, k = 4; break;
    case ORK_TS_EIGHT_STEP: ch = eight, k = 8; break;
    case ORK_TS_NEXT_SAMPLE: { /* torch.randint(0, n - 2): one left to step to */
        int i = (int)(ork_rng_uniform(r) * (NEXT_SAMPLE_N - 2));
        return i < NEXT_SAMPLE_N - 3 ? i : NEXT_SAMPLE_N - 3;
    }
    default: break;
    }
    double u = ork_rng_uniform(r);
    if (ch) { /* random.choices */
        int i = (int)(u * k);
        return ch[i < k ? i : k - 1];
    }
    double x;
    switch (p->cs) {
    case ORK_CS_CONTENT: x = u * u * u * TS_N; break;        /* favours high noise */
    case ORK_CS_STYLE: x = (1.0 - u * u * u) * TS_N; break;  /* favours low noise */
    default: x = u * (TS_N - 1); break;                      /* torch.randint(0, 999): 0 .. 998 */
    }
    int i = (int)x;
    return i < 0 ? 0 : i > TS_N - 1 ? TS_N - 1 : i;
}

/* The k-th largest of v[0..n) (quickselect; v is reordered). */
static double kth_largest(double *v, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        double piv = v[(lo + hi) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] > piv) i++;
            while (v[j] < piv) j--;
            if (i <= j) {
                double t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else break;
    }
    return v[k];
}

void ork_ts_sample(const ork_ts_params *p, ork_rng *r, float *t, float *weight) {
    int idx = ork_ts_index(p, r);
    double v[TS_N], sigma;
    *weight = 1.0f;
    switch (p->type) {
    case ORK_TS_SIGMOID: /* sort(1 - sigmoid(randn(1000)))[idx]: the same law as sigmoid(randn) */
        for (int i = 0; i < TS_N; i++) v[i] = 1.0 / (1.0 + exp(-ork_rng_normal(r)));
        sigma = kth_largest(v, TS_N, idx);
        break;
    case ORK_TS_LOGNORM_BLEND: { /* alpha 0.75: 750 log-normal, 250 linear; .to(int) */
        enum { NL = TS_N * 3 / 4, NLIN = TS_N - NL };
        double mx = 0;
        for (int i = 0; i < NL; i++) {
            v[i] = exp(0.333 * ork_rng_normal(r));
            if (v[i] > mx) mx = v[i];
        }
        for (int i = 0; i < NL; i++) v[i] = (1.0 - v[i] / mx) * 1000.0;
        for (int i = 0; i < NLIN; i++) v[NL + i] = 1000.0 - 999.0 * i / (double)(NLIN - 1);
        sigma = floor(kth_largest(v, TS_N, idx)) / 1000.0;
        break;
    }
    default:
        sigma = ork_ts_sigma_at(p, idx);
        if (p->type == ORK_TS_WEIGHTED) *weight = weighing_scheme[idx];
        break;
    }
    *t = (float)sigma;
}

ork_status ork_lr_type_parse(const char *s, ork_lr_type *out) {
    if (!strcmp(s, "constant")) *out = ORK_LR_CONSTANT;
    else if (!strcmp(s, "cosine")) *out = ORK_LR_COSINE;
    else if (!strcmp(s, "linear")) *out = ORK_LR_LINEAR;
    else if (!strcmp(s, "constant_with_warmup")) *out = ORK_LR_CONSTANT_WARMUP;
    else return ORK_E_CONFIG;
    return ORK_OK;
}

double ork_lr_at(const ork_lr_params *p, int64_t step) {
    double lr = p->lr;
    switch (p->type) {
    case ORK_LR_COSINE: {
        int64_t w = p->warmup_steps, decay = p->cosine_decay_steps > 0 ? p->cosine_decay_steps : p->total_steps;
        if (decay > p->total_steps) decay = p->total_steps;
        double min_ratio = p->eta_min / (lr > 1e-8 ? lr : 1e-8);
        if (step < w) return lr * (double)step / (double)(w > 1 ? w : 1);
        if (step >= w + decay) return lr * min_ratio;
        double prog = (double)(step - w) / (double)(decay > 1 ? decay : 1);
        return lr * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + cos(ORK_PI * prog)));
    }
    case ORK_LR_LINEAR: {
        double s = p->start_factor, e = p->end_factor;
        int64_t n = p->total_steps > 0 ? p->total_steps : 1;
        if (step >= n) return lr * e;
        return lr * (s + (e - s) * (double)step / (double)n);
    }
    case ORK_LR_CONSTANT_WARMUP: {
        int64_t w = p->warmup_steps;
        if (step < w) return lr * (double)step / (double)(w > 1 ? w : 1);
        return lr;
    }
    default:
        return lr;
    }
}
