// The built-in demo text: original prose written for meshtrain, used when data.path is empty.
// It is small (about 10 KB) and deliberately regular (short chapters that follow the same pattern,
// recurring names and phrases) so a tiny byte-level model learns visible structure in a minute.
#include <string_view>

#include "data/text_dataset.h"

namespace mt {
namespace {

constexpr std::string_view kText = R"TEXT(THE VILLAGE BY THE SLOW RIVER

Chapter One. The Ferryman.

In the village by the slow river there lived a ferryman called Odo. Every morning Odo woke before the birds, drank a cup of warm milk, and walked down to the water. His boat was old and green, and it creaked when he stepped into it. "Good morning, river," said Odo, and the river said nothing, as rivers do. He rowed the baker across at six, the teacher across at seven, and the goats across whenever the goats wished to go. At noon he ate bread and cheese on the bank. In the evening he rowed everyone home again, and when the last lamp was lit in the last window, Odo tied his boat to the post and went to bed.

Chapter Two. The Baker.

In the village by the slow river there lived a baker called Mira. Every morning Mira woke before the ferryman, lit her oven, and shaped the dough she had left to rise in the night. Her loaves were round and brown, and they cracked a little on top. "Good morning, oven," said Mira, and the oven said nothing, as ovens do. She sold round loaves to the teacher, long loaves to the miller, and small sweet rolls to the children on their way to school. At noon she swept the flour from the floor. In the evening she counted her coins, set aside a loaf for Odo, and when the last lamp was lit in the last window, Mira banked her fire and went to bed.

Chapter Three. The Teacher.

In the village by the slow river there lived a teacher called Anselm. Every morning Anselm woke after the baker, ate one of her round loaves, and crossed the river in the ferryman's green boat. His school was a single room with nine desks and one window. "Good morning, children," said Anselm, and the children said "Good morning, teacher," as children do. He taught them letters in the first hour, numbers in the second hour, and the names of the stars in the third hour, when it was already too bright to see any. At noon he ate his bread under the chestnut tree. In the evening he marked their slates by candlelight, and when the last lamp was lit in the last window, Anselm closed his book and went to bed.

Chapter Four. The Miller.

In the village by the slow river there lived a miller called Petra. Every morning Petra woke with the wind, opened the sluice, and watched the great wheel begin to turn. Her mill was tall and white, and it hummed when the stones went round. "Good morning, wheel," said Petra, and the wheel said nothing, as wheels do. She ground wheat for the baker, barley for the brewer, and a little maize for the hens that followed her about the yard. At noon she sat on a sack and listened to the water. In the evening she closed the sluice, brushed the dust from her hair, and when the last lamp was lit in the last window, Petra let the wheel rest and went to bed.

Chapter Five. The Goats.

In the village by the slow river there lived three goats called Hop, Skip, and Bramble. Every morning the goats woke whenever they pleased, ate whatever they found, and went wherever the grass was greenest. Their coats were grey and white, and their bells rang when they ran. "Good morning, goats," said everyone, and the goats said "Meh," as goats do. They ate the teacher's roses on Monday, the miller's sacks on Tuesday, and on Wednesday they ate a corner of the ferryman's hat while he was not looking. At noon they slept in the sun. In the evening they asked to be rowed across the river, and when the last lamp was lit in the last window, the goats lay down in a heap and went to sleep.

Chapter Six. The Weather.

In the village by the slow river the weather changed with the seasons. In spring the river rose and the ferryman rowed more slowly. In summer the river fell and the children waded across to school, and the ferryman sat in his boat with nothing to do. In autumn the chestnuts dropped on the teacher's roof, one, two, three, all night long. In winter the river froze at the edges, the wheel of the mill stood still, and the baker's oven was the warmest place in the village. Everyone came to stand beside it, and nobody was in a hurry to leave.

Chapter Seven. The Market.

Once a month there was a market in the square. The baker brought bread, the miller brought flour, and the goats brought trouble. A man from the city came with ribbons and needles and a box of small brass bells. "Good morning, village," said the man from the city, and the village said "Good morning," as villages do. The children bought ribbons. The teacher bought a new piece of chalk. The ferryman bought a new hat, because of the goats. At noon everyone ate together at one long table. In the evening the man from the city packed his box, and Odo rowed him across the river, and when the last lamp was lit in the last window, the square was quiet again.

Chapter Eight. The Flood.

One spring it rained for nine days. On the first day the river rose to the first step. On the second day it rose to the second step. On the third day it rose to the door of the mill, and Petra carried her sacks upstairs. On the fourth day the ferryman could not see the post where he tied his boat. On the fifth day the school was closed, and the children were glad. On the sixth day the baker baked twice as much bread, because everyone was hungry and nobody could go anywhere. On the seventh day the goats stood on the roof of the shed and complained. On the eighth day the rain grew thin. On the ninth day the sun came out, the river went back to its bed, and the whole village came outside to look at the mud.

Chapter Nine. The Bridge.

After the flood the village held a meeting. "We should build a bridge," said the miller. "A bridge would not float away." "A bridge would not need a ferryman," said the teacher, and everyone looked at Odo. Odo said nothing for a long time. Then he said, "A bridge is a good thing. But a bridge cannot tell you the river is rising. A bridge cannot carry the goats when they are tired. And a bridge does not say good morning." So the village built a small bridge for the summer, and kept the ferry for the spring, and Odo rowed the goats across whenever the goats wished to go.

Chapter Ten. The Lesson.

On the last day of the school year the teacher asked the children what they had learned. The first child said, "I learned my letters." The second child said, "I learned my numbers." The third child said, "I learned that the baker wakes before the ferryman, the ferryman wakes before the birds, and the goats wake whenever they please." The teacher laughed and said that this was the most important lesson of all. Then he gave each child a sweet roll from the baker, and they walked home along the river in the long light of the evening.

A SHORT BOOK OF COUNTING

One boat on the river. Two oars in the boat. Three goats on the bank. Four loaves on the shelf. Five desks by the window. Six sacks in the mill. Seven stars over the water. Eight lamps in the street. Nine days of rain. Ten children going home.

One boat on the river, and the ferryman in the boat. Two oars in the boat, and the water on the oars. Three goats on the bank, and a hat in the mouth of a goat. Four loaves on the shelf, and one of them for Odo. Five desks by the window, and a slate on every desk. Six sacks in the mill, and flour on every sack. Seven stars over the water, and no one awake to name them. Eight lamps in the street, and the last lamp in the last window. Nine days of rain, and then the sun. Ten children going home, and each of them with a sweet roll.

QUESTIONS AND ANSWERS

Who wakes first in the village? The baker wakes first, because bread takes a long time.
Who wakes second in the village? The birds wake second, and then the ferryman.
Who rows the boat? The ferryman rows the boat, in the morning and in the evening.
Who turns the wheel? The river turns the wheel, and the miller watches it turn.
Who eats the roses? The goats eat the roses, and the teacher plants more.
Who names the stars? The teacher names the stars, but only at night.
What does the river say? The river says nothing, as rivers do.
What does the oven say? The oven says nothing, as ovens do.
What do the goats say? The goats say "Meh," as goats do.
When does the village sleep? The village sleeps when the last lamp is lit in the last window.

Chapter Eleven. The Stranger.

One autumn evening a stranger came down the road with a pack on her back and mud on her boots. She stopped at the bank and called across the water. "Is there a ferry?" she asked. "There is a ferry," said Odo, "and there is a bridge, but the bridge is for summer." So he rowed her across in the green boat, and she told him she was a mapmaker who drew rivers. "What will you draw here?" asked Odo. "A slow river," said the stranger, "a mill, a school, a bakery, a bridge, a ferry, and three goats." "You must draw the goats large," said Odo, "or they will be offended." The mapmaker laughed, and stayed for three days, and drew the goats very large indeed.

Chapter Twelve. The Map.

The map of the village by the slow river hung in the school for many years. On it the river was blue and wide, the mill was white and tall, and the bakery had a thin line of smoke above its chimney. The school was drawn with nine small desks inside it, and the ferry was drawn halfway across the water, with a tiny ferryman in a tiny hat. The goats were drawn so large that they covered half the meadow. The children loved the map. Every morning, before the lessons began, they touched the river on the map and said, "Good morning, river," and the map said nothing, as maps do.

Chapter Thirteen. The End of the Year.

At the end of the year the snow came, soft and slow, like the river. The baker baked a great round loaf with a star on top. The miller brought a jug of cider. The teacher read a story aloud, and the ferryman, who had no boat to row, told the children about the nine days of rain. The goats were allowed inside, just this once, and they behaved very well, and ate only one corner of one hat. When the story was over, the village walked home through the snow. And when the last lamp was lit in the last window, everyone in the village by the slow river went to bed, and the river went on, slowly, as rivers do.

THE END
)TEXT";

}  // namespace

std::string_view builtin_text() { return kText; }

}  // namespace mt
